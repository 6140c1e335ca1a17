"""The typed graph IR of one layer instance's `forward`, its lowering from the checked syntax
tree, and the optimization passes (``tribuild.ir.passes``) run per ``-O`` level
(``tribuild.ir.pipeline``). Pure functions: no torch, no triton, no I/O."""

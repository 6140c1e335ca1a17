"""Hand-written PyTorch references of the model zoo (models/*.tri, models/blocks/*.tri).

Each model module ``<stem>.py`` mirrors ``models/<stem>.tri``: one ``nn.Module`` class per
`.tri` layer, named as in the source, with the source's members as children under the same
names, and a forward that performs the source's operations in the same order. It exposes
``make(**args)`` (the entry layer's construction arguments, same names and defaults) and
``ENTRY = "models/<stem>.tri:<Layer>"``. Shared built-ins live in ``common.py`` (whose
docstring lists the naming rules generated code must follow), shared blocks in ``blocks/``.
Imports inside the package are relative, so it loads as ``tests.codegen.references`` or
as ``references`` alike.
"""

"""The no-op path: "no work to do" from the manifest, without the engine or the compiler."""

"""Tests of the runtime package tribuild.runtime."""

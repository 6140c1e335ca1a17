"""Tests of the runtime package tribuild.gpu."""

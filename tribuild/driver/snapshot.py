"""A whole build's manifest, the snapshot the no-op check compares the next build with
(``tribuild.driver.noop.manifest``: what it holds and how it is checked, without the engine).

It is taken only after a build whose every requested target built, and written last
(``build.build``): it vouches for a whole build.
"""

from __future__ import annotations

import os

from tribuild.base.hashing import digest
from tribuild.driver import outputs
from tribuild.driver.noop import manifest
from tribuild.queries.inputs import source_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tribuild.driver.results import BuildResult, Request
    from tribuild.driver.session import Project
    from tribuild.engine import Database


def manifest_of(
    db: Database, project: Project, request: Request, result: BuildResult
) -> dict[str, object]:
    """The build's manifest: Tribuild.toml as it was read (and parsed), the sources as the
    queries read them, the outputs as they are now, with the outputs record (a lost record
    would leave the next stale outputs in place)."""
    root = project.root
    assert project.config_source is not None  # a project loaded from its Tribuild.toml
    toml_digest, table = project.config_source
    inputs = {os.path.relpath(project.configured.path, root): toml_digest}
    for path in result.inputs:
        text = source_text(db, path).text
        assert text is not None  # a build that read an unreadable file failed: no manifest
        inputs[path] = digest(text.encode("utf-8"))
    prefix = os.path.relpath(result.out_dir, root)
    outs = [os.path.normpath(os.path.join(prefix, rel)) for t in result.targets for rel in t.files]
    outs.append(os.path.normpath(os.path.join(prefix, outputs.RECORD)))  # stale removal's
    return manifest.snapshot(
        root,
        project.cache_dir,
        manifest.request_key(request.targets, request.opt_level),
        inputs,
        tuple(outs),
        config=table,
    )

"""Machine-readable reports of `check` and `build`, for editors and CI.

Formats (``--format``):
- *json*: one object on stdout, versioned by ``"version"`` (``project.SCHEMA_VERSION``); the
  fields of each kind are listed in docs/output.md.
- *sarif*: a SARIF 2.1.0 log, which GitHub code scanning and other SARIF viewers read.
- *github*: GitHub Actions workflow commands, ``::error file=…,line=…::message``, one per
  diagnostic, which the Actions log shows as annotations on the lines they name.
"""

from __future__ import annotations

from tribuild.base.printable import printable
from tribuild.diagnostics_render import to_json
from tribuild.project import SCHEMA_VERSION

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tribuild.driver.cpu_kernels import KernelOutcome

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
FORMATS = ("text", "json", "sarif", "github")


def check_json(result) -> dict:
    """`check --format json`: a ``CheckResult`` as plain data."""
    return {
        "version": SCHEMA_VERSION,
        "kind": "check",
        "diagnostics": [to_json(d, result.sources) for d in result.diagnostics],
        "files": len(result.files),
        "errors": result.errors,
    }


def check_config_json(err) -> dict:
    """`check --format json` when Tribuild.toml has problems (a ``ConfigError``): no
    diagnostics, and each problem in ``config_errors`` (path, line and col, null when not
    known, message, help), so the reader still gets its one object."""
    return {
        "version": SCHEMA_VERSION,
        "kind": "check",
        "diagnostics": [],
        "files": 0,
        "errors": len(err.problems),
        "config_errors": config_errors(err),
    }


def config_errors(err) -> list[dict]:
    return [
        {"path": p.path, "line": p.line, "col": p.column, "message": p.message, "help": p.help}
        for p in err.problems
    ]


def build_config_json(err) -> dict:
    """`build --format json` when Tribuild.toml has problems: nothing built, each problem
    in ``config_errors`` (as `check`'s), ``opt_level`` null (the configuration gives it)."""
    return {
        "version": SCHEMA_VERSION,
        "kind": "build",
        "ok": False,
        "opt_level": None,
        "targets": [],
        "written": [],
        "unchanged": [],
        "removed": [],
        "kept": [],
        "config_errors": config_errors(err),
    }


def config_document(err, format: str, kind: str, version: str) -> str | None:
    """The document ``--format`` prints when Tribuild.toml has problems (a ``ConfigError``),
    or None for the text format: the reader (an editor, CI's annotator) still gets one."""
    import json

    if format == "json":
        data = check_config_json(err) if kind == "check" else build_config_json(err)
    elif format == "sarif":
        data = _log([_config_result(p) for p in err.problems], {}, version)
    elif format == "github":
        return "".join(
            _annotation("error", _config_props(p), _config_text(p)) for p in err.problems
        )
    else:
        return None
    return json.dumps(data, indent=1) + "\n"


def _config_text(problem) -> str:
    return problem.message + (f"\nhelp: {problem.help}" if problem.help else "")


def _relative(path: str) -> str:
    """A configuration problem's file as the annotator and SARIF viewers take it: relative to
    the current folder (CI runs in the checkout), in POSIX form."""
    import os

    return os.path.relpath(path).replace(os.sep, "/")


def _config_props(problem) -> dict:
    props: dict = {"file": _relative(problem.path)}
    if problem.line is not None:
        props |= {"line": problem.line, "col": problem.column or 1}
    return props | {"title": "Tribuild.toml"}


def _config_result(problem) -> dict:
    location: dict = {"artifactLocation": {"uri": _relative(problem.path)}}
    if problem.line is not None:
        location["region"] = {"startLine": problem.line, "startColumn": problem.column or 1}
    return {
        "ruleId": "config",
        "level": "error",
        "message": {"text": _config_text(problem)},
        "locations": [{"physicalLocation": location}],
    }


def build_json(result) -> dict:
    """`build --format json`: a ``BuildResult`` as plain data (paths relative to the output
    folder for files, to the project root for diagnostics)."""
    report = result.report
    return {
        "version": SCHEMA_VERSION,
        "kind": "build",
        "ok": not result.failed and not result.kernels_failed,
        "opt_level": result.opt_level,
        "targets": [
            {
                "name": t.name,
                "ok": not t.failed,
                "diagnostics": [to_json(d, result.sources) for d in t.diagnostics],
                "error": t.error,
                "problem": str(t.problem) if t.problem is not None else None,
            }
            for t in result.targets
        ],
        "written": list(report.written) if report else [],
        "unchanged": list(report.unchanged) if report else [],
        "removed": list(report.removed) if report else [],
        "kept": list(report.kept) if report else [],
        "cpu_kernels": _kernels_json(result.cpu_kernels),
    }


def _kernels_json(outcome: KernelOutcome | None) -> dict[str, str | None] | None:
    """What the build did about the CPU kernels (``driver.cpu_kernels``); None when its
    targets need none (or it stopped early, or ``TRIBUILD_CPU_KERNELS=off``)."""
    if outcome is None:
        return None
    return {
        "state": outcome.state,
        "library": outcome.library,
        "error": outcome.first_error,
        "message": outcome.message,
    }


def sarif(diagnostics, sources, version: str) -> dict:
    """A SARIF 2.1.0 log of ``diagnostics``, one result each; locations are relative to the
    project root (``%SRCROOT%``)."""
    rules: dict[str, dict] = {}
    results = []
    for diag in diagnostics:
        data = to_json(diag, sources)
        rules.setdefault(diag.code, {"id": diag.code, "name": diag.code})
        results.append(
            {
                "ruleId": diag.code,
                "level": "error" if diag.severity == "error" else "warning",
                "message": {"text": _message(data)},
                "locations": [_sarif_location(data)],
                "relatedLocations": [
                    _sarif_location(label, i) | {"message": {"text": label["label"] or "here"}}
                    for i, label in enumerate(data["secondary"], 1)
                ],
            }
        )
    return _log(results, rules, version)


def _log(results: list, rules: dict, version: str) -> dict:
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "tribuild",
                        "version": version,
                        "rules": sorted(rules.values(), key=lambda r: r["id"]),
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"description": {"text": "project root"}}},
                "results": results,
            }
        ],
    }


def _sarif_location(data: dict, ident: int | None = None) -> dict:
    location: dict = {
        "physicalLocation": {
            "artifactLocation": {"uri": data["path"], "uriBaseId": "%SRCROOT%"},
            "region": {
                "startLine": data["line"],
                "startColumn": data["col"],
                "endLine": data["end_line"],
                "endColumn": max(data["end_col"], data["col"]),
            },
        }
    }
    if ident is not None:
        location["id"] = ident
    return location


def github(diagnostics, sources) -> str:
    """GitHub Actions annotations, one line per diagnostic."""
    lines = []
    for diag in diagnostics:
        data = to_json(diag, sources)
        command = "error" if diag.severity == "error" else "warning"
        props = {
            "file": data["path"],
            "line": data["line"],
            "col": data["col"],
            "endLine": data["end_line"],
            "endColumn": data["end_col"],
            "title": f"{diag.code}",
        }
        lines.append(_annotation(command, props, _message(data)))
    return "".join(lines)


def _annotation(command: str, props: dict, message: str) -> str:
    text = ",".join(f"{k}={_escape(str(v), True)}" for k, v in props.items())
    return f"::{command} {text}::{_escape(message, False)}\n"


def _message(data: dict) -> str:
    """A diagnostic's message, with its help on a line of its own (SARIF and annotations have
    one text field)."""
    return data["message"] + (f"\nhelp: {data['help']}" if data["help"] else "")


def _escape(text: str, property_value: bool) -> str:
    """Escape as the Actions runner unescapes: ``%``, CR and LF, and in a property value
    also ``:`` and ``,``; every other control character as ``\\x1b`` (a file name or a
    message must not reach the log's terminal as an escape sequence)."""
    text = printable(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))
    if property_value:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text

"""The protocol glue: pygls's server, its handlers, and the threads they use.

Terms:
- *event loop*: pygls's asyncio loop, which reads messages and runs the handlers. Edits are
  handled there at once: the new text is set in the database, which cancels whatever query
  runs (the engine's cancellation), and a check is scheduled ``debounce`` seconds later;
  each edit pushes it back (``_schedule``).
- *query thread*: one thread runs every query: checks and requests, one at a time. A request
  whose queries were cancelled by an edit runs again on the new text; a check that was
  cancelled is dropped (the edit that cancelled it scheduled the next).
- *generation*: counts edits. A check publishes only if no edit came while it ran, so what
  the editor shows is always the diagnostics of the latest text.
- *guarded handler*: an internal error in a handler is logged with its traceback through
  ``window/logMessage``; a request then fails alone (a JSON-RPC error) and the server goes on.
  What reaches the handlers was checked first (``wire``): a malformed message is answered or
  logged in one line there.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer

from tribuild.diagnostics import Diagnostic, Loc
from tribuild.engine import Cancelled
from tribuild.lang import format_text
from tribuild.lsp import complete, navigate, symbols
from tribuild.lsp import hover as hovering
from tribuild.lsp import rename as renaming
from tribuild.lsp.positions import known_encoding, to_offset, to_position
from tribuild.lsp.state import EditorState, Found, uri_to_path
from tribuild.lsp.wire import CheckedProtocol
from tribuild.lsp.wire import serve as serve_wire
from tribuild.queries.report import QuerySources
from tribuild.queries.targets import reached_instances

RETRIES = 50  # a request cancelled by edits again and again gives up after this many runs


class TriServer:
    def __init__(self, debounce: float = 0.05) -> None:
        self.ls = LanguageServer("tribuild", _version(), protocol_cls=CheckedProtocol)
        self.debounce = debounce
        self.state: EditorState | None = None
        self.worker = ThreadPoolExecutor(1, thread_name_prefix="queries")
        self.generation = 0
        self._timer: asyncio.TimerHandle | None = None
        self._published: dict[str, list] = {}
        self._problems: list[str] = []  # logged by the last check that published
        self._register()
        self._register_editing()

    # --- threads ------------------------------------------------------------------------

    async def query(self, fn, *args):
        """``fn(*args)`` on the query thread; run again while edits cancel it."""
        for _ in range(RETRIES):
            try:
                return await asyncio.wrap_future(self.worker.submit(fn, *args))
            except Cancelled:
                await asyncio.sleep(0)
        raise Cancelled("the document kept changing")

    def _schedule(self) -> None:
        self.generation += 1
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        generation = self.generation
        self._timer = loop.call_later(
            self.debounce, lambda: loop.create_task(self._publish(generation))
        )

    async def _publish(self, generation: int) -> None:
        if generation != self.generation or self.state is None:
            return
        versions = {uri: doc.version for uri, doc in self.ls.workspace.text_documents.items()}
        try:
            found = await asyncio.wrap_future(self.worker.submit(self._check))
        except Cancelled:
            return
        except Exception:
            self.log_error("checking the project", traceback.format_exc())
            return
        if generation != self.generation:
            return
        diagnostics, problems = found
        if problems != self._problems:  # each change of them logged once, not every edit
            for problem in problems:
                self.log(problem, lsp.MessageType.Warning)
            self._problems = problems
        for uri in sorted(set(self._published) | set(diagnostics)):
            new = diagnostics.get(uri, [])
            if self._published.get(uri) != new:
                self.ls.text_document_publish_diagnostics(
                    lsp.PublishDiagnosticsParams(
                        uri=uri, diagnostics=new, version=versions.get(uri)
                    )
                )
            if new:
                self._published[uri] = new
            else:
                self._published.pop(uri, None)

    def _check(self) -> tuple[dict[str, list[lsp.Diagnostic]], list[str]]:
        state = self.editor
        found = state.check()
        out = {
            state.uri_of(path): [self.to_lsp(d, found) for d in diags]
            for path, diags in found.by_path.items()
        }
        problems = list(found.problems)
        if state.config_problem:
            problems.insert(0, state.config_problem)
        return out, problems

    @property
    def editor(self) -> EditorState:
        """``state``, which ``initialize`` made: what reads it runs after (a handler of a request
        that may come before tests ``state`` itself)."""
        assert self.state is not None
        return self.state

    # --- conversions --------------------------------------------------------------------

    @property
    def encoding(self) -> str:
        kind = self.ls.workspace.position_encoding
        return known_encoding(getattr(kind, "value", kind))

    def range_of(self, loc: Loc) -> lsp.Range:
        sources = QuerySources(self.editor.db)
        text = sources.text(loc.path)
        start, end = sources.char_range(loc)
        return lsp.Range(self.position(text, start), self.position(text, end))

    def position(self, text: str, offset: int) -> lsp.Position:
        line, character = to_position(text, offset, self.encoding)
        return lsp.Position(line=line, character=character)

    def location(self, loc: Loc) -> lsp.Location:
        return lsp.Location(uri=self.editor.uri_of(loc.path), range=self.range_of(loc))

    def to_lsp(self, diag: Diagnostic, found: Found) -> lsp.Diagnostic:
        message = diag.message
        if diag.help:
            message += f"\nhelp: {diag.help}"
        for note in diag.notes:
            message += f"\nnote: {note}"
        related = [
            lsp.DiagnosticRelatedInformation(self.location(label.loc), label.message or "here")
            for label in diag.secondary
        ]
        related += [
            lsp.DiagnosticRelatedInformation(self.location(r.loc), r.message)
            for r in found.related.get(diag, ())
        ]
        return lsp.Diagnostic(
            range=self.range_of(diag.primary.loc),
            message=message,
            severity=lsp.DiagnosticSeverity.Error
            if diag.severity == "error"
            else lsp.DiagnosticSeverity.Warning,
            code=diag.code,
            source="tribuild",
            related_information=related or None,
        )

    def offset(self, path: str, position: lsp.Position) -> int:
        return to_offset(self.editor.text(path), position.line, position.character, self.encoding)

    # --- logging ------------------------------------------------------------------------

    def log(self, message: str, kind: lsp.MessageType = lsp.MessageType.Info) -> None:
        self.ls.window_log_message(lsp.LogMessageParams(type=kind, message=message))

    def log_error(self, what: str, trace: str) -> None:
        self.log(f"tribuild lsp: internal error while {what}:\n{trace}", lsp.MessageType.Error)

    # --- requests answered on the query thread -------------------------------------------

    def instances(self, path: str, item_id: str) -> list[hovering.Built]:
        """The instances the project builds of an item: for each, the targets reaching it
        and, for a target's own instance, its example input."""
        found: dict[object, hovering.Built] = {}
        for target, root in self.editor.roots():
            for key, _ in reached_instances(self.editor.db, root).instances:
                if key.path == path and key.item_id == item_id:
                    built = found.setdefault(key, hovering.Built(key, [], None))
                    if target is not None and target.name not in built.targets:
                        built.targets.append(target.name)
                        if key == root and built.input is None:
                            built.input = target.input
        return list(found.values())

    def _site(self, uri: str, position: lsp.Position) -> navigate.Site | None:
        path = self.state.path_of(uri) if self.state else None
        if path is None:
            return None
        self.editor.load([path])
        return navigate.site_at(self.editor.db, path, self.offset(path, position))

    def _hover(self, uri: str, position: lsp.Position) -> lsp.Hover | None:
        site = self._site(uri, position)
        if site is None or site.symbol is None:
            return None
        text = hovering.hover_text(self.editor.db, site, self.instances)
        if not text:
            return None
        loc = Loc(site.path, site.entry.id, site.occurrence.span)
        return lsp.Hover(
            contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text),
            range=self.range_of(loc),
        )

    def _definition(self, uri: str, position: lsp.Position) -> list[lsp.Location]:
        site = self._site(uri, position)
        if site is None or site.symbol is None:
            return []
        where = navigate.definition_span(self.editor.db, site.symbol)
        if where is None:
            return []
        self.editor.load([where[0]])
        return [self.location(Loc(*where))]

    def _references(self, uri: str, position: lsp.Position, declaration: bool) -> list:
        site = self._site(uri, position)
        if site is None or site.symbol is None:
            return []
        db = self.editor.db
        refs = navigate.references(db, site.symbol, self.editor.reported())
        where = navigate.definition_span(db, site.symbol)
        return [
            self.location(Loc(*ref))
            for ref in refs
            if declaration or where is None or tuple(ref) != tuple(where)
        ]

    def _symbols(self, uri: str) -> list[lsp.DocumentSymbol]:
        path = self.state.path_of(uri) if self.state else None
        if path is None:
            return []
        self.editor.load([path])
        return symbols.document_symbols(self.editor.db, path, self.range_of)

    def _semantic_tokens(self, uri: str) -> lsp.SemanticTokens:
        path = self.state.path_of(uri) if self.state else None
        if path is None:
            return lsp.SemanticTokens(data=[])
        self.editor.load([path])
        data = symbols.semantic_tokens(self.editor.db, path, self.encoding)
        return lsp.SemanticTokens(data=data)

    def _completion(self, uri: str, position: lsp.Position) -> list[lsp.CompletionItem]:
        path = self.state.path_of(uri) if self.state else None
        if path is None:
            return []
        files = self.editor.reported()
        text = self.editor.text(path)
        return complete.completions(
            self.editor.db,
            path,
            self.offset(path, position),
            files,
            lambda offset: self.position(text, offset),
        )

    def _signature_help(self, uri: str, position: lsp.Position) -> lsp.SignatureHelp | None:
        path = self.state.path_of(uri) if self.state else None
        if path is None:
            return None
        self.editor.load([path])
        return complete.signature_help(self.editor.db, path, self.offset(path, position))

    def _prepare_rename(self, uri: str, position: lsp.Position):
        site = self._site(uri, position)
        if site is None or not renaming.renameable(site.symbol):
            return None
        loc = Loc(site.path, site.entry.id, site.occurrence.span)
        return lsp.PrepareRenamePlaceholder(
            range=self.range_of(loc), placeholder=site.occurrence.name
        )

    def _rename(self, uri: str, position: lsp.Position, new: str) -> lsp.WorkspaceEdit | None:
        site = self._site(uri, position)
        if site is None or site.symbol is None:
            return None
        found = renaming.rename_edits(
            self.editor.db, site.symbol, site.occurrence.name, new, self.editor.reported()
        )
        changes: dict[str, list[lsp.TextEdit]] = {}
        for path, item_id, span in found:
            edit = lsp.TextEdit(range=self.range_of(Loc(path, item_id, span)), new_text=new)
            changes.setdefault(self.editor.uri_of(path), []).append(edit)
        return lsp.WorkspaceEdit(changes=changes)

    def _formatting(self, uri: str) -> list[lsp.TextEdit]:
        """One edit replacing the whole document, if its layout changes (none for a text
        the lexer finds errors in)."""
        path = self.state.path_of(uri) if self.state else None
        if path is None:
            return []
        text = self.editor.text(path)
        laid = format_text(text)
        if laid is None or laid == text:
            return []
        whole = lsp.Range(self.position(text, 0), self.position(text, len(text)))
        return [lsp.TextEdit(range=whole, new_text=laid)]

    # --- handlers -----------------------------------------------------------------------

    def _register(self) -> None:
        ls = self.ls
        guard = self.guard

        @ls.feature(lsp.INITIALIZE)
        @guard("initializing")
        def initialize(params: lsp.InitializeParams) -> None:
            folder = _root_folder(params)
            self.state = EditorState(folder)

        @ls.feature(lsp.INITIALIZED)
        @guard("starting")
        async def initialized(params: lsp.InitializedParams) -> None:
            caps = ls.client_capabilities.workspace
            watched = caps and caps.did_change_watched_files
            self._schedule()
            if watched and watched.dynamic_registration:
                await self._watch_files()

        @ls.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
        @guard("opening a document")
        def did_open(params: lsp.DidOpenTextDocumentParams) -> None:
            self._edited(params.text_document.uri)

        @ls.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
        @guard("applying an edit")
        def did_change(params: lsp.DidChangeTextDocumentParams) -> None:
            self._edited(params.text_document.uri)

        @ls.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
        @guard("closing a document")
        def did_close(params: lsp.DidCloseTextDocumentParams) -> None:
            path = self.editor.path_of(params.text_document.uri)
            if path is not None:
                self.editor.close_document(path)
                self._schedule()

        @ls.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
        @guard("reading changed files")
        def watched(params: lsp.DidChangeWatchedFilesParams) -> None:
            found = [self.editor.path_of(c.uri) for c in params.changes]
            paths = [p for p in found if p is not None]
            if "Tribuild.toml" in paths:
                self.editor.reload_config()
            elif any(c.type != lsp.FileChangeType.Changed for c in params.changes):
                self.editor.rescan()
            self.editor.disk_changed(paths)
            self._schedule()

        @ls.feature(lsp.TEXT_DOCUMENT_HOVER)
        @guard("answering hover")
        async def hover(params: lsp.HoverParams) -> lsp.Hover | None:
            return await self.query(self._hover, params.text_document.uri, params.position)

        @ls.feature(lsp.TEXT_DOCUMENT_DEFINITION)
        @guard("finding a definition")
        async def definition(params: lsp.DefinitionParams) -> list[lsp.Location]:
            return await self.query(self._definition, params.text_document.uri, params.position)

        @ls.feature(lsp.TEXT_DOCUMENT_REFERENCES)
        @guard("finding references")
        async def references(params: lsp.ReferenceParams) -> list[lsp.Location]:
            return await self.query(
                self._references,
                params.text_document.uri,
                params.position,
                params.context.include_declaration,
            )

        @ls.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
        @guard("listing symbols")
        async def document_symbol(params: lsp.DocumentSymbolParams) -> list:
            return await self.query(self._symbols, params.text_document.uri)

        @ls.feature(
            lsp.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL,
            lsp.SemanticTokensLegend(
                token_types=list(symbols.TOKEN_TYPES),
                token_modifiers=list(symbols.TOKEN_MODIFIERS),
            ),
        )
        @guard("classifying tokens")
        async def semantic_tokens(params: lsp.SemanticTokensParams) -> lsp.SemanticTokens:
            return await self.query(self._semantic_tokens, params.text_document.uri)

    async def _watch_files(self) -> None:
        """Ask the client to report changes of .tri files and Tribuild.toml."""
        try:
            await self.ls.client_register_capability_async(
                lsp.RegistrationParams(
                    registrations=[
                        lsp.Registration(
                            id="tribuild-files",
                            method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                            register_options=lsp.DidChangeWatchedFilesRegistrationOptions(
                                watchers=[
                                    lsp.FileSystemWatcher(glob_pattern="**/*.tri"),
                                    lsp.FileSystemWatcher(glob_pattern="**/Tribuild.toml"),
                                ]
                            ),
                        )
                    ]
                )
            )
        except Exception as err:  # the client refused: edits in the editor still work
            self.log(f"could not ask the client to watch files: {err}", lsp.MessageType.Warning)

    def _register_editing(self) -> None:
        ls = self.ls
        guard = self.guard

        @ls.feature(
            lsp.TEXT_DOCUMENT_COMPLETION,
            lsp.CompletionOptions(trigger_characters=['"', "/", "(", ",", " "]),
        )
        @guard("completing")
        async def completion(params: lsp.CompletionParams) -> list[lsp.CompletionItem]:
            return await self.query(self._completion, params.text_document.uri, params.position)

        @ls.feature(
            lsp.TEXT_DOCUMENT_SIGNATURE_HELP,
            lsp.SignatureHelpOptions(trigger_characters=["(", ","]),
        )
        @guard("answering signature help")
        async def signature_help(params: lsp.SignatureHelpParams) -> lsp.SignatureHelp | None:
            return await self.query(self._signature_help, params.text_document.uri, params.position)

        @ls.feature(lsp.TEXT_DOCUMENT_FORMATTING)
        @guard("formatting")
        async def formatting(params: lsp.DocumentFormattingParams) -> list[lsp.TextEdit]:
            return await self.query(self._formatting, params.text_document.uri)

        @ls.feature(lsp.TEXT_DOCUMENT_PREPARE_RENAME)
        @guard("preparing a rename")
        async def prepare_rename(params: lsp.PrepareRenameParams):
            return await self.query(self._prepare_rename, params.text_document.uri, params.position)

        @ls.feature(lsp.TEXT_DOCUMENT_RENAME)
        async def rename(params: lsp.RenameParams) -> lsp.WorkspaceEdit | None:
            try:
                return await self.query(
                    self._rename, params.text_document.uri, params.position, params.new_name
                )
            except renaming.Refused as refused:
                raise JsonRpcException(
                    str(refused), code=lsp.LSPErrorCodes.RequestFailed.value
                ) from None
            except Exception:
                self.log_error("renaming", traceback.format_exc())
                raise

    def _edited(self, uri: str) -> None:
        """An open document's text changed (or it was opened): set it, which cancels the
        running check, and check again after the debounce."""
        path = self.editor.path_of(uri)
        if path is None:
            return
        text = self.ls.workspace.get_text_document(uri).source
        self.editor.open_document(path, text)
        self._schedule()

    def guard(self, what: str):
        """A decorator: the handler's internal errors are logged (``window/logMessage``, with
        the traceback) and raised again, so a request fails alone."""

        def wrap(handler):
            if asyncio.iscoroutinefunction(handler):

                @functools.wraps(handler)
                async def run_async(params):
                    try:
                        return await handler(params)
                    except Exception:
                        self.log_error(what, traceback.format_exc())
                        raise

                return run_async

            @functools.wraps(handler)
            def run(params):
                try:
                    return handler(params)
                except Exception:
                    self.log_error(what, traceback.format_exc())
                    raise

            return run

        return wrap


def _root_folder(params: lsp.InitializeParams) -> str:
    """The folder the client opened: its first workspace folder, its root, else the current
    directory."""
    for uri in [f.uri for f in params.workspace_folders or ()] + [params.root_uri or ""]:
        path = uri_to_path(uri) if uri else None
        if path:
            return path
    return params.root_path or os.getcwd()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tribuild")
    except PackageNotFoundError:  # run from a source tree that was not installed
        return "unknown"


def serve(debounce: float = 0.05) -> int:
    """Serve on stdin and stdout until the client says exit (``wire.serve``: the exit code).
    The protocol gets its own copy of the standard output, and ``sys.stdout`` becomes the
    standard error, so that a stray print cannot corrupt the stream of messages."""
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout.flush()
    sys.stdout = sys.stderr
    return serve_wire(TriServer(debounce).ls, sys.stdin.buffer, channel)

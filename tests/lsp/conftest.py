"""Fixtures of the language server tests: a copy of the zoo (its models and Tribuild.toml)
and a real LSP client (pytest-lsp) talking over stdio to `tribuild lsp` in a subprocess."""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0
SERVER = [sys.executable, "-m", "tribuild", "lsp", "--debounce", "20"]


@pytest.fixture
def zoo(tmp_path) -> Path:
    dest = tmp_path / "zoo"
    shutil.copytree(REPO / "models", dest / "models")
    shutil.copy(REPO / "Tribuild.toml", dest / "Tribuild.toml")
    return dest


def registered(params: lsp.RegistrationParams) -> None:
    """The client's answer to ``client/registerCapability`` (the server asks to be told of
    file changes): accepted."""


def recording_client() -> LanguageClient:
    """pytest-lsp's test client, which also keeps every ``publishDiagnostics`` it receives,
    in order, in ``published``."""
    client = LanguageClient(converter_factory=default_converter)
    client.published = []  # type: ignore[attr-defined]

    def publish(params: lsp.PublishDiagnosticsParams) -> None:
        client.published.append(params)  # type: ignore[attr-defined]
        client.diagnostics[params.uri] = params.diagnostics

    features = dict(DEFAULT_CLIENT_FEATURES)
    features[lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = publish
    features[lsp.CLIENT_REGISTER_CAPABILITY] = registered
    register_lsp_features(client, features)
    return client


CONFIG = ClientServerConfig(server_command=SERVER, client_factory=recording_client)


async def start(client: LanguageClient, zoo: Path) -> None:
    result = await client.initialize_session(
        lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(
                workspace=lsp.WorkspaceClientCapabilities(
                    did_change_watched_files=lsp.DidChangeWatchedFilesClientCapabilities(
                        dynamic_registration=True
                    )
                )
            ),
            root_uri=zoo.as_uri(),
        )
    )
    client.zoo = zoo  # type: ignore[attr-defined]
    client.server_capabilities = result.capabilities  # type: ignore[attr-defined]


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient, zoo: Path):
    """A server of its own, on a copy of the zoo of its own: for tests that edit files."""
    await start(lsp_client, zoo)
    yield
    await lsp_client.shutdown_session()


@pytest.fixture(scope="module")
def shared_zoo(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("shared") / "zoo"
    shutil.copytree(REPO / "models", dest / "models")
    shutil.copy(REPO / "Tribuild.toml", dest / "Tribuild.toml")
    return dest


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def shared(lsp_client: LanguageClient, shared_zoo: Path):
    """One server for a module's tests that only ask (its files are left as they are; a
    document is opened once, ``show`` gives it a text)."""
    await start(lsp_client, shared_zoo)
    lsp_client.versions = {}  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


def show(client: LanguageClient, path: Path, text: str | None = None) -> str:
    """Open ``path`` in ``client`` (once) with ``text`` (default: the file's), or give the open
    document that text; its uri."""
    uri = path.as_uri()
    text = path.read_text() if text is None else text
    versions = client.versions  # type: ignore[attr-defined]
    if uri not in versions:
        versions[uri] = 1
        client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                lsp.TextDocumentItem(uri=uri, language_id="tri", version=1, text=text)
            )
        )
    else:
        versions[uri] += 1
        replace_all(client, uri, text, versions[uri])
    return uri


async def diagnostics_until(
    client: LanguageClient, uri: str, done: Callable[[list[lsp.Diagnostic]], bool]
) -> list[lsp.Diagnostic]:
    """The diagnostics of ``uri`` once ``done`` holds for them (waiting for publications)."""

    async def wait() -> list[lsp.Diagnostic]:
        while not done(list(client.diagnostics.get(uri, []))):
            await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        return list(client.diagnostics.get(uri, []))

    return await asyncio.wait_for(wait(), TIMEOUT)


def open_file(client: LanguageClient, path: Path, version: int = 1) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id="tri", version=version, text=path.read_text())
        )
    )
    return uri


def replace_all(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def position_of(text: str, needle: str, nth: int = 0, delta: int = 0) -> lsp.Position:
    """The position of the ``nth`` occurrence of ``needle`` (plus ``delta`` characters; the
    texts here are ASCII, so characters are UTF-16 units)."""
    at = -1
    for _ in range(nth + 1):
        at = text.index(needle, at + 1)
    at += delta
    line = text.count("\n", 0, at)
    return lsp.Position(line=line, character=at - (text.rfind("\n", 0, at) + 1))

// Starts `tribuild lsp` (the command of the `tribuild.command` setting) for .tri files.
"use strict";
const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const settings = vscode.workspace.getConfiguration("tribuild");
  const [command, ...args] = settings.get("command");
  const debounce = String(settings.get("debounceMs"));
  const server = { command, args: [...args, "--debounce", debounce], transport: TransportKind.stdio };
  client = new LanguageClient(
    "tribuild",
    "tribuild",
    { run: server, debug: server },
    {
      documentSelector: [{ scheme: "file", language: "tri" }],
      synchronize: {
        fileEvents: vscode.workspace.createFileSystemWatcher("**/{*.tri,Tribuild.toml}"),
      },
    },
  );
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };

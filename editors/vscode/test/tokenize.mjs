// Tokenizes .tri files with the extension's TextMate grammar, as VS Code does (vscode-textmate
// with the Oniguruma regex engine compiled to WebAssembly), and prints one JSON object:
// { file: [[line, start, end, [scopes...]], ...] } (0-based lines, character offsets).
// Usage: node test/tokenize.mjs FILE...
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const here = dirname(fileURLToPath(import.meta.url));
const textmate = require("vscode-textmate");
const oniguruma = require("vscode-oniguruma");

const wasm = readFileSync(join(dirname(require.resolve("vscode-oniguruma")), "onig.wasm"));
await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
const registry = new textmate.Registry({
  onigLib: Promise.resolve({
    createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
    createOnigString: (text) => new oniguruma.OnigString(text),
  }),
  loadGrammar: async (scopeName) =>
    scopeName === "source.tri"
      ? textmate.parseRawGrammar(
          readFileSync(join(here, "..", "syntaxes", "tri.tmLanguage.json"), "utf8"),
          "tri.tmLanguage.json",
        )
      : null,
});
const grammar = await registry.loadGrammar("source.tri");

const out = {};
for (const file of process.argv.slice(2)) {
  let state = textmate.INITIAL;
  const tokens = [];
  readFileSync(file, "utf8")
    .split("\n")
    .forEach((line, n) => {
      const result = grammar.tokenizeLine(line, state);
      for (const t of result.tokens) tokens.push([n, t.startIndex, t.endIndex, t.scopes]);
      state = result.ruleStack;
    });
  out[file] = tokens;
}
process.stdout.write(JSON.stringify(out));

#!/usr/bin/env node
// A conform adapter (specs/adapter.md, protocol 1) around a small kimi_k2 parser.
// Node 20, no npm dependencies. Run it as
//   conform run corpus/kimi_k2 --parser 'cmd:node examples/adapters/node/kimi_adapter.mjs'
//
// The parser is the kind found in agent harnesses: it buffers the whole turn and splits the text
// on markers once the stream has ended. Its deliberate weaknesses (see ../README.md), which
// expected_failures.txt lists case by case:
//
// 1. It reports only the final result per turn, no events: conform cannot check the delta
//    contract and says so ("not applicable"), and it emits no warnings at all.
// 2. Text after the first <|tool_calls_section_end|> is dropped, and so is every later section.
// 3. The arguments run to the next literal <|tool_call_end|>: not JSON-aware, so a marker inside
//    a JSON string cuts them; only the five canonical tokens are markup; no limits.
// 4. No reasoning: <think>…</think> stays text, its tags leaking into the text.
//
// Because it waits for the end of the turn, it is split-invariant: chunking cannot hurt it.

import { createInterface } from "node:readline";

const SB = "<|tool_calls_section_begin|>";
const SE = "<|tool_calls_section_end|>";
const CB = "<|tool_call_begin|>";
const AB = "<|tool_call_argument_begin|>";
const CE = "<|tool_call_end|>";

function parseTurn(text) {
  const result = { text: "", calls: [], errors: [] };
  let body;
  const sb = text.indexOf(SB);
  const cb = text.indexOf(CB);
  if (sb >= 0 && (cb < 0 || sb < cb)) {
    result.text = text.slice(0, sb);
    body = text.slice(sb + SB.length);
  } else if (cb >= 0) {
    result.text = text.slice(0, cb);
    body = text.slice(cb);
  } else {
    result.text = text;
    return result;
  }
  const se = body.indexOf(SE);
  if (se >= 0) body = body.slice(0, se); // weakness 2: whatever follows is dropped
  for (const part of body.split(CB).slice(1)) {
    const ab = part.indexOf(AB);
    if (ab < 0) {
      result.errors.push({ kind: "malformed_markup", message: "call header without argument marker" });
      continue;
    }
    let header = part.slice(0, ab).trim();
    const rest = part.slice(ab + AB.length);
    const ce = rest.indexOf(CE); // weakness 3
    const raw = (ce >= 0 ? rest.slice(0, ce) : rest).trim();
    let id;
    const colon = header.lastIndexOf(":");
    if (colon >= 0) {
      id = header.slice(colon + 1).trim() || undefined;
      header = header.slice(0, colon);
    }
    const name = header.slice(header.lastIndexOf(".") + 1).trim();
    if (!name) {
      result.errors.push({ kind: "missing_name", message: "empty function name" });
      continue;
    }
    if (!raw) {
      result.errors.push({ kind: "empty_arguments", message: "empty arguments" });
      continue;
    }
    let args;
    try {
      args = JSON.parse(raw);
    } catch (e) {
      result.errors.push({ kind: ce >= 0 ? "invalid_json" : "unterminated", message: String(e) });
      continue;
    }
    if (args === null || typeof args !== "object" || Array.isArray(args)) {
      result.errors.push({ kind: "invalid_json", message: "arguments must be a JSON object" });
      continue;
    }
    const call = { name, arguments: JSON.stringify(args) }; // as text, like OpenAI's API
    if (id !== undefined) call.id = id;
    result.calls.push(call);
  }
  return result;
}

function handle(msg) {
  if (msg.type === "hello") {
    return { type: "hello", protocol: 1, name: "kimi-example-node", formats: ["kimi_k2"] };
  }
  try {
    if (msg.type !== "parse" || msg.format !== "kimi_k2") {
      throw new Error(`cannot handle ${msg.type} for ${msg.format}`);
    }
    const turns = msg.turns.map((turn) => {
      const bytes = Buffer.concat(
        turn.chunks.map((c) => (typeof c === "string" ? Buffer.from(c, "utf8") : Buffer.from(c.b64, "base64"))),
      );
      const text = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
      const result = parseTurn(text);
      if (text.includes("\ufffd") && !bytes.toString("latin1").includes("\xef\xbf\xbd")) {
        result.errors.push({ kind: "invalid_utf8", message: "invalid UTF-8" });
      }
      return result;
    });
    return { type: "result", id: msg.id, turns };
  } catch (e) {
    return { type: "error", id: msg.id, message: String(e) };
  }
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on("line", (line) => {
  if (!line.trim()) return;
  process.stdout.write(JSON.stringify(handle(JSON.parse(line))) + "\n");
});

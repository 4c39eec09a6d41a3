// An OpenAI-compatible chat-completions server for the end-to-end suite: it records every
// request (one JSON line each) and answers with a fixed text. A user message containing
// `[[tool NAME ARGS_JSON]]` makes it call that tool once through the host's `tool_call`
// tool; the next answer then quotes the tool's result, so the test can read it.
import { appendFileSync } from "node:fs";
import http from "node:http";

export const REPLY = "OK, noted.";

function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => (typeof p === "string" ? p : (p?.text ?? ""))).join("\n");
  return "";
}

function answer(body) {
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const last = messages[messages.length - 1];
  if (last && last.role === "tool") return { text: `TOOL RESULT: ${textOf(last.content)}` };
  const users = messages.filter((m) => m.role === "user").map((m) => textOf(m.content)).join("\n");
  const m = /\[\[tool (\S+) (\{.*?\})\]\]/s.exec(users);
  if (m && !messages.some((x) => x.role === "tool")) {
    return { toolCall: { id: "call_1", type: "function", function: { name: "tool_call", arguments: JSON.stringify({ id: m[1], args: JSON.parse(m[2]) }) } } };
  }
  return { text: REPLY };
}

export function startFakeModel(logPath) {
  const server = http.createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", () => {
      appendFileSync(logPath, `${JSON.stringify({ method: req.method, url: req.url, body: raw })}\n`);
      if (req.url.endsWith("/models")) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ object: "list", data: [{ id: "fake-model", object: "model" }] }));
        return;
      }
      let body = {};
      try {
        body = JSON.parse(raw);
      } catch {}
      const out = answer(body);
      const base = { id: "chatcmpl-1", created: 1, model: "fake-model" };
      const usage = { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 };
      const finish = out.toolCall ? "tool_calls" : "stop";
      if (body.stream) {
        res.writeHead(200, { "content-type": "text/event-stream" });
        const delta = out.toolCall ? { role: "assistant", tool_calls: [{ index: 0, ...out.toolCall }] } : { role: "assistant", content: out.text };
        res.write(`data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`);
        res.write(`data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta: {}, finish_reason: finish }], usage })}\n\n`);
        res.write("data: [DONE]\n\n");
        res.end();
        return;
      }
      const message = out.toolCall ? { role: "assistant", content: null, tool_calls: [out.toolCall] } : { role: "assistant", content: out.text };
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ ...base, object: "chat.completion", choices: [{ index: 0, message, finish_reason: finish }], usage }));
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split("/").pop())) {
  const server = await startFakeModel(process.argv[2] ?? "/dev/null");
  console.log(server.address().port);
}

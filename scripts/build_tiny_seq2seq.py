"""Build the tiny T5-layout seq2seq fixture used by the summarizer tests.

Dev-only: needs the ``fixtures`` extra (torch, transformers, onnx). Never imported by the daemon
or by the tests; the tests only read what this script writes into ``tests/fixtures/tiny_t5``:

* ``tokenizer.json``   a word-level tokenizer with T5's special ids (<pad>=0, </s>=1, <unk>=2)
                       and T5's ``$A </s>`` template;
* ``encoder_model.onnx``, ``decoder_model.onnx``, ``decoder_with_past_model.onnx``
                       exported with optimum's input/output names (``input_ids``,
                       ``attention_mask``, ``encoder_hidden_states``, ``encoder_attention_mask``,
                       ``past_key_values.{i}.{decoder,encoder}.{key,value}`` and
                       ``present.{i}...``), so the runtime code path is the one real
                       ``optimum/t5-small`` exports take;
* ``summarizer.json``  the manifest, with sha256 pins of every asset;
* ``expected_outputs.json``  for several inputs: the prompt token ids and the greedy output of
                       the reference framework (a manual torch greedy loop over the full
                       transformers model, re-running the whole prefix at every step, with raw
                       logits and no logits processors), i.e. token ids, per-token
                       log-probabilities and confidence = exp(mean log-prob).

The model is a randomly initialised T5 (seeded). Out of the box it is degenerate: transformers
ties the LM head to the shared embedding (whatever ``tie_word_embeddings`` says), so every step
re-emits the previous token. The script gives the head its own N(0, 1) weights instead, with
zero rows for ``<pad>`` and ``<unk>`` (logit 0, never the argmax in practice), and makes
``</s>`` a copy of the row of one ordinary "trigger" token scaled by 1.05: the model then ends a
sequence exactly where it would have emitted that token. The trigger is the first token (in id
order) for which every case yields at least 3 tokens, at least two cases stop on ``</s>`` and at
least one runs to ``max_new_tokens``.
It also checks that every greedy step has a clear top-1 margin, so that a float32 rounding
difference between torch and onnxruntime cannot flip an argmax, and that onnxruntime reproduces
the recorded outputs with and without the KV-cache decoder before writing anything.

Usage:  .venv/bin/python scripts/build_tiny_seq2seq.py [--out tests/fixtures/tiny_t5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

SEED = 20260522
PREFIX = "summarize: "
MAX_CONTEXT = 512
EOS_GAIN = 1.05
# Width: large enough that re-running the decoder over the prefix and re-projecting the
# 512-token encoder output (what decoding without a KV cache does) costs real compute.
D_MODEL = 128
D_FF = 128
MIN_MARGIN = 1e-3

# Words of the vocabulary: the corpus the tests' turns are written from.
CORPUS = """
summarize : the user asked the agent to remember that the deploy runs on friday .
the assistant said it will keep the release notes short and send them to the team .
we talked about the memory daemon , the socket path , the embedding model and the summary .
please do not use mutexes in the hot path ; use channels or atomic counters instead .
the build failed because the test for the parser timed out after ten seconds .
i prefer tabs over spaces , dark mode , and short answers with code examples .
tomorrow we will review the database schema , the index and the backup plan .
the meeting moved to monday morning at nine o'clock in the small room .
can you check why the cache is cold after a restart ? it should warm up quickly .
yes , the vector store keeps raw turns forever and compaction only adds summaries .
my cat is called pixel and she likes to sleep on the keyboard when i write python .
we need a plan for the migration : first copy the data , then switch the readers .
the latency of a single query must stay under six milliseconds on a laptop .
thanks ! that fixed it . the error was a missing newline at the end of the file .
remember my name is alex and i work on the search team with sam and kim .
what did we decide about the retry policy for failed requests last week ?
we decided to retry three times with a backoff of one , two and four seconds .
the summarizer should keep the most recent turns when the input is too long .
an old story about a red boat , a green river , a quiet town and a lost key .
numbers like one two three four five six seven eight nine ten are words too .
"""


def _vocab() -> dict[str, int]:
    words = sorted(set(re.findall(r"\w+|[^\w\s]+", CORPUS.lower())))
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    for word in words:
        vocab.setdefault(word, len(vocab))
    return vocab


def build_tokenizer(out: Path) -> Any:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    tok = Tokenizer(models.WordLevel(_vocab(), unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)]
    )
    tok.add_special_tokens(["<pad>", "</s>", "<unk>"])
    tok.save(str(out / "tokenizer.json"))
    return tok


# Test cases: (name, turns, max_new_tokens). The long case exceeds the 512-token context so the
# prompt keeps only the most recent turns.
def _cases() -> list[tuple[str, list[str], int]]:
    long_turns = [
        f"turn {i % 10} : the user asked the agent to remember that the deploy runs on friday "
        f"and the assistant said it will keep the release notes short ."
        for i in range(40)
    ]
    long_turns.append("the latency of a single query must stay under six milliseconds .")
    return [
        (
            "two-turns",
            [
                "Remember my name is Alex and I work on the search team.",
                "Thanks! I will remember that you work on the search team.",
            ],
            16,
        ),
        (
            "four-turns",
            [
                "What did we decide about the retry policy for failed requests?",
                "We decided to retry three times with a backoff of one, two and four seconds.",
                "Please do not use mutexes in the hot path.",
                "Use channels or atomic counters instead.",
            ],
            24,
        ),
        (
            "unknown-words",
            ["Zebra quokka narwhal axolotl, the deploy runs on Friday.", "ok"],
            12,
        ),
        ("single-turn", ["The build failed because the test for the parser timed out."], 8),
        (
            "migration",
            [
                "We need a plan for the migration.",
                "First copy the data, then switch the readers.",
                "Tomorrow we will review the database schema, the index and the backup plan.",
            ],
            20,
        ),
        (
            "cat",
            ["My cat is called Pixel.", "She likes to sleep on the keyboard when I write python."],
            20,
        ),
        ("long-truncated", long_turns, 20),
    ]


def prompt_ids(tok: Any, turns: list[str]) -> tuple[list[int], int, bool]:
    """Reference prompt: prefix + turns joined by newlines; drop the oldest turns until it fits.

    Returns (ids, number of turns kept, truncated). This is the naive definition the runtime's
    faster implementation must agree with.
    """
    turns = [t.strip() for t in turns if t.strip()]
    for start in range(len(turns)):
        kept = turns[start:]
        ids = tok.encode(PREFIX + "\n".join(kept), add_special_tokens=True).ids
        if len(ids) <= MAX_CONTEXT:
            return list(ids), len(kept), start > 0
    raise SystemExit("a single fixture turn exceeds the context; shorten it")


def build_model(seed: int, eos_trigger: int, vocab_size: int) -> Any:
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(seed)
    cfg = T5Config(
        vocab_size=vocab_size,
        d_model=D_MODEL,
        d_kv=D_MODEL // 4,
        d_ff=D_FF,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
        dropout_rate=0.0,
        feed_forward_proj="relu",
        tie_word_embeddings=False,
        decoder_start_token_id=0,
        pad_token_id=0,
        eos_token_id=1,
    )
    cfg._attn_implementation = "eager"
    model = T5ForConditionalGeneration(cfg).eval()
    gen = torch.Generator().manual_seed(seed + 1)
    head = torch.randn(vocab_size, cfg.d_model, generator=gen)
    head[0] = 0.0  # <pad>
    head[2] = 0.0  # <unk>
    # </s> copies the row of one ordinary token (scaled up a little): the model ends a sequence
    # exactly where it would otherwise emit that token. eos_trigger <= 0 means "never".
    head[1] = head[eos_trigger] * EOS_GAIN if eos_trigger > 0 else 0.0
    # transformers ties the LM head to the shared embedding whatever the config says; a tied
    # head makes every step repeat the previous token, so give the head its own weights.
    model.lm_head.weight = torch.nn.Parameter(head)
    model.config.tie_word_embeddings = False
    return model


def _lm_logits(model: Any, hidden: Any) -> Any:
    if getattr(model.config, "scale_decoder_outputs", False):
        hidden = hidden * (model.model_dim**-0.5)
    return model.lm_head(hidden)


def torch_greedy(model: Any, ids: list[int], max_new: int) -> dict[str, Any]:
    """Greedy decoding with the full model, whole prefix re-run each step, raw logits."""
    import torch

    enc = torch.tensor([ids])
    mask = torch.ones_like(enc)
    seq = [model.config.decoder_start_token_id]
    out_ids: list[int] = []
    logprobs: list[float] = []
    margins: list[float] = []
    stopped = "max"
    with torch.no_grad():
        encoder_outputs = model.encoder(input_ids=enc, attention_mask=mask)
        for _ in range(max_new):
            logits = model(
                encoder_outputs=encoder_outputs,
                attention_mask=mask,
                decoder_input_ids=torch.tensor([seq]),
            ).logits[0, -1]
            top2 = torch.topk(logits, 2).values
            margins.append(float(top2[0] - top2[1]))
            nxt = int(torch.argmax(logits))
            if nxt == model.config.eos_token_id:
                stopped = "eos"
                break
            lp = torch.log_softmax(logits.double(), dim=-1)[nxt]
            out_ids.append(nxt)
            logprobs.append(float(lp))
            seq.append(nxt)
    conf = math.exp(sum(logprobs) / len(logprobs)) if logprobs else 0.0
    return {
        "outputIds": out_ids,
        "logprobs": logprobs,
        "confidence": conf,
        "stoppedBy": stopped,
        "minMargin": min(margins) if margins else 0.0,
    }


def hf_generate_ids(model: Any, ids: list[int], max_new: int) -> list[int]:
    import torch

    out = model.generate(
        input_ids=torch.tensor([ids]),
        attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        do_sample=False,
        num_beams=1,
        max_new_tokens=max_new,
    )
    gen = [int(t) for t in out[0].tolist()[1:]]
    if gen and gen[-1] == model.config.eos_token_id:
        gen = gen[:-1]
    return [t for t in gen if t != model.config.pad_token_id]


def export_onnx(model: Any, out: Path) -> None:  # noqa: C901 - torch wrapper classes inside
    import torch

    n_layers = model.config.num_decoder_layers

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            return self.m.encoder(
                input_ids=input_ids, attention_mask=attention_mask
            ).last_hidden_state

    class LeanDecoder(torch.nn.Module):
        """T5 decoder written out op by op (same weights and math as transformers' T5Stack).

        transformers' own decoder traces into ~470 ONNX nodes per step, most of them mask and
        cache bookkeeping; this one needs a fraction of that, which is what a KV-cache step
        costs at this model size. The builder checks that onnxruntime running these graphs
        reproduces the transformers reference token for token.
        """

        def __init__(self) -> None:
            super().__init__()
            self.m = model
            first = model.decoder.block[0].layer[0].SelfAttention
            self.heads = first.n_heads
            self.dkv = first.key_value_proj_dim

        @staticmethod
        def norm(ln: Any, x: Any) -> Any:
            var = x.pow(2).mean(-1, keepdim=True)
            return ln.weight * (x * torch.rsqrt(var + ln.variance_epsilon))

        # Batch size is fixed to 1 (the runtime decodes one sequence at a time): constant
        # reshape targets keep shape arithmetic out of the per-step graph.
        def split(self, x: Any) -> Any:
            return x.reshape(1, -1, self.heads, self.dkv).transpose(1, 2)

        def merge(self, x: Any) -> Any:
            return x.transpose(1, 2).reshape(1, -1, self.heads * self.dkv)

        def step(
            self,
            input_ids: Any,
            encoder_attention_mask: Any,
            past_self: list[tuple[Any, Any]] | None,
            cross: list[tuple[Any, Any]] | None,
            encoder_hidden_states: Any,
        ) -> tuple[Any, list[Any]]:
            dec = self.m.decoder
            att0 = dec.block[0].layer[0].SelfAttention
            h = dec.embed_tokens(input_ids)
            q_len = input_ids.shape[1]
            past_len = past_self[0][0].shape[2] if past_self is not None else 0
            ctx = torch.arange(q_len)[:, None] + past_len
            mem = torch.arange(q_len + past_len)[None, :]
            bucket = att0._relative_position_bucket(
                mem - ctx,
                bidirectional=False,
                num_buckets=att0.relative_attention_num_buckets,
                max_distance=att0.relative_attention_max_distance,
            )
            bias = att0.relative_attention_bias(bucket).permute(2, 0, 1).unsqueeze(0)
            if past_self is None:  # several query positions: causal mask
                bias = bias + (mem > ctx).to(h.dtype) * -1e9
            enc_bias = (1.0 - encoder_attention_mask[:, None, None, :].to(h.dtype)) * -1e9
            presents: list[Any] = []
            for i, blk in enumerate(dec.block):
                sa = blk.layer[0].SelfAttention
                x = self.norm(blk.layer[0].layer_norm, h)
                q, k, v = self.split(sa.q(x)), self.split(sa.k(x)), self.split(sa.v(x))
                if past_self is not None:
                    k = torch.cat([past_self[i][0], k], dim=2)
                    v = torch.cat([past_self[i][1], v], dim=2)
                w = torch.softmax(torch.matmul(q, k.transpose(2, 3)) + bias, dim=-1)
                h = h + sa.o(self.merge(torch.matmul(w, v)))
                ca = blk.layer[1].EncDecAttention
                x = self.norm(blk.layer[1].layer_norm, h)
                cq = self.split(ca.q(x))
                if cross is not None:
                    ck, cv = cross[i]
                else:
                    ck = self.split(ca.k(encoder_hidden_states))
                    cv = self.split(ca.v(encoder_hidden_states))
                w = torch.softmax(torch.matmul(cq, ck.transpose(2, 3)) + enc_bias, dim=-1)
                h = h + ca.o(self.merge(torch.matmul(w, cv)))
                ff = blk.layer[2]
                x = self.norm(ff.layer_norm, h)
                h = h + ff.DenseReluDense.wo(torch.relu(ff.DenseReluDense.wi(x)))
                presents += [k, v, ck, cv]
            h = self.norm(dec.final_layer_norm, h)
            return _lm_logits(self.m, h), presents

    class Decoder(LeanDecoder):
        def forward(
            self, encoder_attention_mask: Any, input_ids: Any, encoder_hidden_states: Any
        ) -> Any:
            logits, presents = self.step(
                input_ids, encoder_attention_mask, None, None, encoder_hidden_states
            )
            return (logits, *presents)

    class DecoderWithPast(LeanDecoder):
        def forward(self, encoder_attention_mask: Any, input_ids: Any, *past: Any) -> Any:
            past_self = [(past[4 * i], past[4 * i + 1]) for i in range(n_layers)]
            cross = [(past[4 * i + 2], past[4 * i + 3]) for i in range(n_layers)]
            logits, presents = self.step(input_ids, encoder_attention_mask, past_self, cross, None)
            out = [logits]
            for i in range(n_layers):
                out += [presents[4 * i], presents[4 * i + 1]]
            return tuple(out)

    present: list[str] = []
    for i in range(n_layers):
        for part in ("decoder", "encoder"):
            present += [f"present.{i}.{part}.key", f"present.{i}.{part}.value"]
    past_names = [n.replace("present", "past_key_values") for n in present]
    present_dec = [n for n in present if ".decoder." in n]

    enc_ids = torch.tensor([[5, 6, 7, 8, 9, 1]])
    enc_mask = torch.ones_like(enc_ids)
    opts: dict[str, Any] = {"dynamo": False, "opset_version": 17, "do_constant_folding": True}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Encoder(),
            (enc_ids, enc_mask),
            str(out / "encoder_model.onnx"),
            input_names=["input_ids", "attention_mask"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "encoder_sequence"},
                "attention_mask": {0: "batch", 1: "encoder_sequence"},
                "last_hidden_state": {0: "batch", 1: "encoder_sequence"},
            },
            **opts,
        )
        hidden = Encoder()(enc_ids, enc_mask)
        dec_ids = torch.tensor([[0, 5, 7]])
        # Decoders: batch fixed to 1 (see LeanDecoder), sequence axes dynamic.
        dyn: dict[str, dict[int, str]] = {
            "encoder_attention_mask": {1: "encoder_sequence"},
            "input_ids": {1: "decoder_sequence"},
            "encoder_hidden_states": {1: "encoder_sequence"},
            "logits": {1: "decoder_sequence"},
        }
        for name in present:
            dyn[name] = {2: "encoder_sequence" if ".encoder." in name else "decoder_sequence"}
        torch.onnx.export(
            Decoder(),
            (enc_mask, dec_ids, hidden),
            str(out / "decoder_model.onnx"),
            input_names=["encoder_attention_mask", "input_ids", "encoder_hidden_states"],
            output_names=["logits", *present],
            dynamic_axes=dyn,
            **opts,
        )
        past = Decoder()(enc_mask, dec_ids, hidden)[1:]
        dyn2: dict[str, dict[int, str]] = {"encoder_attention_mask": {1: "encoder_sequence"}}
        for name in past_names:
            dyn2[name] = {2: "encoder_sequence" if ".encoder." in name else "past_sequence"}
        for name in present_dec:
            dyn2[name] = {2: "past_sequence_plus_1"}
        torch.onnx.export(
            DecoderWithPast(),
            (enc_mask, torch.tensor([[9]]), *past),
            str(out / "decoder_with_past_model.onnx"),
            input_names=["encoder_attention_mask", "input_ids", *past_names],
            output_names=["logits", *present_dec],
            dynamic_axes=dyn2,
            **opts,
        )


def ort_greedy(out: Path, ids: list[int], max_new: int, use_past: bool) -> list[int]:
    """Independent onnxruntime check (not the daemon's code) before anything is written."""
    import onnxruntime as ort

    enc = ort.InferenceSession(str(out / "encoder_model.onnx"))
    dec = ort.InferenceSession(str(out / "decoder_model.onnx"))
    past_sess = ort.InferenceSession(str(out / "decoder_with_past_model.onnx"))
    x = np.array([ids], dtype=np.int64)
    mask = np.ones_like(x)
    hidden = enc.run(None, {"input_ids": x, "attention_mask": mask})[0]
    seq = [0]
    result: list[int] = []
    past: dict[str, Any] = {}
    for step in range(max_new):
        if use_past and step > 0:
            feeds = {"encoder_attention_mask": mask, "input_ids": np.array([[seq[-1]]]), **past}
            outs = past_sess.run(None, feeds)
            names = [o.name for o in past_sess.get_outputs()]
        else:
            feeds = {
                "encoder_attention_mask": mask,
                "input_ids": np.array([seq], dtype=np.int64),
                "encoder_hidden_states": hidden,
            }
            outs = dec.run(None, feeds)
            names = [o.name for o in dec.get_outputs()]
        for name, value in zip(names[1:], outs[1:], strict=True):
            past[name.replace("present", "past_key_values")] = value
        nxt = int(np.argmax(outs[0][0, -1]))
        if nxt == 1:
            break
        result.append(nxt)
        seq.append(nxt)
    return result


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = Path(__file__).resolve().parent.parent
    parser.add_argument("--out", type=Path, default=root / "tests" / "fixtures" / "tiny_t5")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)

    import tokenizers
    import torch
    import transformers

    torch.set_num_threads(1)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(out)
    vocab_size = tok.get_vocab_size()

    cases = _cases()
    prompts = {name: prompt_ids(tok, turns) for name, turns, _ in cases}

    base = build_model(args.seed, 0, vocab_size)
    base_records = [torch_greedy(base, prompts[name][0], mx) for name, _, mx in cases]
    candidates = sorted({t for r in base_records for t in r["outputIds"]})
    chosen: tuple[int, Any, list[dict[str, Any]]] | None = None
    for trigger in candidates:
        model = build_model(args.seed, trigger, vocab_size)
        records = [torch_greedy(model, prompts[name][0], mx) for name, _, mx in cases]
        lengths = [len(r["outputIds"]) for r in records]
        eos_stops = [r for r in records if r["stoppedBy"] == "eos"]
        max_stops = [r for r in records if r["stoppedBy"] == "max"]
        margin = min(r["minMargin"] for r in records)
        print(f"eos trigger {trigger}: lengths {lengths}, min margin {margin:.4f}", file=sys.stderr)
        if min(lengths) >= 3 and len(eos_stops) >= 2 and max_stops and margin >= MIN_MARGIN:
            chosen = (trigger, model, records)
            break
    if chosen is None:
        raise SystemExit("no EOS trigger gave non-trivial outputs; change SEED")
    trigger, model, records = chosen

    for (name, _, mx), rec in zip(cases, records, strict=True):
        hf = hf_generate_ids(model, prompts[name][0], mx)
        if hf != rec["outputIds"]:
            raise SystemExit(
                f"{name}: transformers generate {hf} != manual loop {rec['outputIds']}"
            )

    with tempfile.TemporaryDirectory() as tmp:
        export_onnx(model, Path(tmp))
        for fname in ("encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx"):
            (out / fname).write_bytes((Path(tmp) / fname).read_bytes())

    for (name, _, mx), rec in zip(cases, records, strict=True):
        for use_past in (False, True):
            got = ort_greedy(out, prompts[name][0], mx, use_past)
            if got != rec["outputIds"]:
                raise SystemExit(
                    f"{name}: onnxruntime (past={use_past}) {got} != {rec['outputIds']}"
                )

    manifest = {
        "backend": "onnx-local",
        "profile": "tiny-t5",
        "family": "tiny-t5-random",
        "encoder": "encoder_model.onnx",
        "decoder": "decoder_model.onnx",
        "decoderWithPast": "decoder_with_past_model.onnx",
        "tokenizer": "tokenizer.json",
        "maxContextTokens": MAX_CONTEXT,
        "prefix": PREFIX,
        "decoderStartTokenId": 0,
        "eosTokenId": 1,
        "sha256": {
            f: sha256(out / f)
            for f in (
                "encoder_model.onnx",
                "decoder_model.onnx",
                "decoder_with_past_model.onnx",
                "tokenizer.json",
            )
        },
    }
    (out / "summarizer.json").write_text(json.dumps(manifest, indent=2) + "\n")

    expected = {
        "generator": {
            "script": "scripts/build_tiny_seq2seq.py",
            "seed": args.seed,
            "eosTrigger": trigger,
            "eosGain": EOS_GAIN,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "reference": "manual torch greedy loop, full prefix each step, raw logits",
        },
        "cases": [
            {
                "name": name,
                "turns": turns,
                "maxNewTokens": mx,
                "inputIds": prompts[name][0],
                "turnsUsed": prompts[name][1],
                "truncated": prompts[name][2],
                "outputIds": rec["outputIds"],
                "logprobs": rec["logprobs"],
                "confidence": rec["confidence"],
                "stoppedBy": rec["stoppedBy"],
                "minMargin": rec["minMargin"],
                "text": tok.decode(rec["outputIds"], skip_special_tokens=True).strip(),
            }
            for (name, turns, mx), rec in zip(cases, records, strict=True)
        ],
    }
    (out / "expected_outputs.json").write_text(json.dumps(expected, indent=1) + "\n")
    total = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    print(f"wrote {out} ({total / 1e6:.2f} MB), eos trigger {trigger}", file=sys.stderr)
    if total >= 5_000_000:
        raise SystemExit("fixture exceeds 5 MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

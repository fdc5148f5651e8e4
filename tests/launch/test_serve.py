"""launch/serve.py: the real server process on a free loopback port, driven with the `openai`
client: chat, tool calls parsed, streaming, token ids and log-probs, concurrent clients, OpenAI-style
errors, and a session recorded as one episode that the records reader reads back."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from rollout.record import EpisodeRecord
from tests.sandbox.test_instances import small_benchmark  # noqa: F401  (session fixture)
from tests.sandbox_fixtures import small_world_path  # noqa: F401  (session fixture)
from tests.subprocess_env import subprocess_env

pytestmark = pytest.mark.slow  # one server process (model load + compiles), ~40 s on 2 cores

openai = pytest.importorskip("openai")
pytest.importorskip("starlette")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "examples"))
import serve_client  # noqa: E402  (the example client: the notebook's step 11 runs it too)

# a context that holds a B2T prompt (docs/examples/serve_client.py's test)
ENGINE = ["rollout.batch_rows=4", "rollout.max_seq_len=6144", "rollout.max_turn_tokens=12"]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "FlightSearch",
            "description": "Flights between two cities on a date.",
            "parameters": {"type": "object", "properties": {"origin": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory) -> Path:
    """A tiny random Qwen3 with Qwen3's vocabulary, saved as a Hugging Face directory with the qwen3
    tokenizer and a checksum manifest (as the evaluation notebook's step 11 exports its model)."""
    from flax import nnx

    from models.checksums import write_manifest
    from models.config import get_config
    from models.hf import save_pretrained
    from models.qwen3 import Qwen3ForCausalLM
    from models.tokenizer import load_tokenizer

    out = tmp_path_factory.mktemp("serve") / "hf"
    shape = dict(vocab_size=151936, hidden_size=32, intermediate_size=64, num_hidden_layers=1)
    model = Qwen3ForCausalLM(get_config("tiny", **shape, initializer_range=0.1), rngs=nnx.Rngs(5))
    save_pretrained(model, out, tokenizer=load_tokenizer("qwen3"))
    write_manifest(out)
    return out


@pytest.fixture(scope="module")
def server(hf_dir, tmp_path_factory):
    """The server process, started as the notebook's step 11 starts it (serve_client.serving);
    yields (base URL, records file)."""
    records = tmp_path_factory.mktemp("records") / "sessions.jsonl"
    args = ["--checkpoint", str(hf_dir), "--records", str(records), "--max-body-bytes", "200000", *ENGINE]
    with serve_client.serving(args, 120, subprocess_env(tmp_path_factory.mktemp("jax_cache"))) as base:
        yield base.removesuffix("/v1"), records


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server[0] + "/v1", api_key="unused", max_retries=0, timeout=120)


def _post(url: str, data: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_greedy_chat_equals_the_engine(client, hf_dir):
    """A greedy completion's ids are the engine's own greedy ids for the same prompt (an
    independent in-process engine run), and the reply carries ids, log-probs and usage; each
    token's top_logprobs are the likeliest of the model's full logits at its position."""
    import jax
    import numpy as np

    from b2tjax.run.policy import load_policy
    from models.chat import encode_chat
    from rollout import RolloutEngine
    from rollout.config import RolloutConfig
    from rollout.episodes import Continue

    messages = [{"role": "system", "content": "Plan trips."}, {"role": "user", "content": "Go to Paris?"}]
    reply = client.chat.completions.create(
        model="b2tjax", messages=messages, temperature=0, logprobs=True, top_logprobs=3
    )
    extra = reply.model_extra
    choice = reply.choices[0]

    policy = load_policy(hf_dir)
    prompt = encode_chat(policy.tokenizer, messages, None, add_generation_prompt=True)
    config = RolloutConfig(batch_rows=4, max_seq_len=6144, max_turn_tokens=12, temperature=0.0, max_turns=1)

    class One:
        instance_id = "x"

        def start(self):
            return [Continue("main", prompt)]

        def on_turn_end(self, stream, text, eos):
            from rollout.episodes import Stop, TurnOutcome
            from sandbox.types import StopReason

            return TurnOutcome([Stop(stream, StopReason.DONE)])

        def on_limit(self, stream, reason):
            return []

    (record,) = RolloutEngine(policy.model, policy.tokenizer, config).run([One()])
    assert extra["prompt_token_ids"] == prompt
    assert choice.model_extra["token_ids"] == record.ids[len(prompt) :]
    assert choice.model_extra["token_logprobs"] == pytest.approx(record.logprobs[len(prompt) :], abs=1e-4)
    assert [t.logprob for t in choice.logprobs.content] == pytest.approx(choice.model_extra["token_logprobs"])
    # the reference: log_softmax of the whole sequence's logits (no cache, every position's head)
    ids = record.ids
    logits = np.asarray(policy.model(np.asarray([ids], np.int32))[0], np.float64)
    valid = policy.tokenizer.vocab_size
    full = np.asarray(jax.nn.log_softmax(logits[len(prompt) - 1 : len(ids) - 1, :valid], axis=-1))
    for token, row in zip(choice.logprobs.content, full):
        best = np.argsort(-row)[:3]
        assert [a.logprob for a in token.top_logprobs] == pytest.approx(row[best].tolist(), abs=1e-4)
        assert [a.token for a in token.top_logprobs] == [policy.tokenizer.decode([int(i)]) for i in best]
        assert token.top_logprobs[0].token == token.token  # greedy: the likeliest was sampled
    assert reply.usage.prompt_tokens == len(prompt)
    assert reply.usage.completion_tokens == len(record.ids) - len(prompt)
    assert choice.finish_reason == ("length" if record.ids[-1] != policy.tokenizer.im_end_id else "stop")

    # 30 tokens: past the server's 12-token decode segment, in pieces that continue one another
    long = client.chat.completions.create(model="b2tjax", messages=messages, temperature=0, max_tokens=30)
    config = dataclasses.replace(config, max_turn_tokens=30)
    (whole,) = RolloutEngine(policy.model, policy.tokenizer, config).run([One()])
    assert long.choices[0].model_extra["token_ids"] == whole.ids[len(prompt) :]
    assert len(whole.ids) - len(prompt) > 12 or whole.ids[-1] == policy.tokenizer.im_end_id


def test_models_health_and_errors(client, server):
    base = server[0]
    assert [m.id for m in client.models.list().data] == ["b2tjax"]
    status, body = _post(base + "/v1/chat/completions", b'{"messages": [')
    assert status == 400 and "not valid JSON" in body["error"]["message"]
    status, body = _post(base + "/v1/chat/completions", json.dumps({"messages": ["x" * 300000]}).encode())
    assert status == 413 and body["error"]["type"] == "invalid_request_error"
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError, match="temperature"):
        client.chat.completions.create(
            model="b2tjax", messages=[{"role": "user", "content": "hi"}], temperature=9
        )
    with pytest.raises(openai.BadRequestError, match="role"):
        client.chat.completions.create(model="b2tjax", messages=[{"role": "robot", "content": "hi"}])
    with socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1]))) as sock:  # leaves mid-body
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{")
    # unknown fields are ignored; the server still answers after every refusal
    reply = client.chat.completions.create(
        model="b2tjax",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=3,
        extra_body={"frobnicate": 1},
    )
    assert len(reply.choices[0].model_extra["token_ids"]) <= 3


def test_tool_call_round_trip_and_session_record(client, server):
    """An assistant turn with tool_calls and a tool reply render with the template; the tool call
    the client parses is the one in the completion text; the session's turns are one record whose
    ids continue token for token, readable by EpisodeRecord.from_json."""
    base, records = server
    reused = json.loads(urllib.request.urlopen(base + "/v1/stats").read())["reused_tokens"]
    headers = {"X-Session-Id": "s1", "X-Instance-Id": "inst-7"}
    messages = [
        {"role": "user", "content": "Find a flight."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c0", "type": "function", "function": {"name": "FlightSearch", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c0", "content": "F123 09:00"},
    ]
    first = client.chat.completions.create(
        model="b2tjax", messages=messages, tools=TOOLS, temperature=0.7, seed=3, extra_headers=headers
    )
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": "c1", "content": "done"})
    second = client.chat.completions.create(
        model="b2tjax", messages=messages, tools=TOOLS, temperature=0.7, seed=3, extra_headers=headers
    )
    # the second turn's prompt starts with the first turn's record: its KV is copied, not computed
    assert json.loads(urllib.request.urlopen(base + "/v1/stats").read())["reused_tokens"] > reused
    p1, p2 = first.model_extra["prompt_token_ids"], second.model_extra["prompt_token_ids"]
    c1 = first.choices[0].model_extra["token_ids"]
    if first.choices[0].finish_reason == "stop":  # a finished turn is continued exactly
        assert p2[: len(p1) + len(c1)] == p1 + c1
    status, body = _post(base + "/v1/sessions/s1/close", json.dumps({"answer": "plan"}).encode())
    assert status == 200
    lines = [EpisodeRecord.from_json(json.loads(x)) for x in records.read_text().splitlines()]
    main = next(r for r in lines if r.stream == "main")
    assert main.instance_id == "inst-7" and main.answer == "plan"
    assert main.ids[: len(p1) + len(c1)] == p1 + c1
    assert sum(main.loss_mask) == len(c1) + (
        len(second.choices[0].model_extra["token_ids"]) if len(lines) == 1 else 0
    )
    assert _post(base + "/v1/sessions/s1/close", b"{}")[0] == 404


def test_tool_calls_parsed():
    from rollout.serve.chat import assistant_message

    call = '<tool_call>\n{"name": "FlightSearch", "arguments": {"a": 1}}\n</tool_call>'
    text = "<think>\nhm\n</think>\n\nok" + call
    message, calls = assistant_message(text, parse_tools=True)
    assert calls and message["reasoning_content"] == "hm" and message["content"] == "ok"
    assert message["tool_calls"][0]["function"] == {"name": "FlightSearch", "arguments": '{"a": 1}'}
    assert (
        assistant_message("<tool_call>{bad</tool_call>", True)[0]["content"] == "<tool_call>{bad</tool_call>"
    )


def test_a_named_tool_choice_gives_the_call_opening_as_prompt(client):
    from models.tokenizer import load_tokenizer

    reply = client.chat.completions.create(
        model="b2tjax",
        messages=[{"role": "user", "content": "Find a flight."}],
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "FlightSearch"}},
        max_tokens=4,
        temperature=0,
    )
    opening = '<tool_call>\n{"name": "FlightSearch", "arguments": '
    given = load_tokenizer("qwen3").encode(opening)
    assert reply.model_extra["prompt_token_ids"][-len(given) :] == given  # given, not sampled
    assert len(reply.choices[0].model_extra["token_ids"]) <= 4
    message = reply.choices[0].message  # the random model's arguments do not parse: the text is kept
    assert message.tool_calls or message.content.startswith(opening)


def test_the_example_client_records_a_benchmark_session(server, small_benchmark, tmp_path):  # noqa: F811
    """docs/examples/serve_client.py: an instance's prompt and tools through the `openai` client, the
    session closed with its answer, recorded as an episode that launch/eval.py scores. The flow of
    the evaluation notebook's step 11 (its test skips that step: a server of its own would cost ~20 s
    more), on a server started as that step starts one (the `server` fixture)."""
    from models.chat import encode_chat
    from models.tokenizer import load_tokenizer
    from sandbox.benchmarks.b2t.benchmark import B2TBenchmark

    base, records = server
    example = [sys.executable, str(ROOT / "docs" / "examples" / "serve_client.py"), "--num", "1"]
    example += ["--base-url", base + "/v1", "--data", str(small_benchmark), "--max-turns", "2"]
    done = subprocess.run(example, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    bench = B2TBenchmark(small_benchmark)
    (visible, truth) = bench.load_split("test")[0]
    assert done.stdout.split()[0] == visible["id"]
    lines = [json.loads(x) for x in records.read_text().splitlines()]
    (mine,) = [x for x in lines if x["instance_id"] == visible["id"]]
    record = EpisodeRecord.from_json(mine)
    # the session starts with the benchmark's own prompt and tools, rendered here, token for token
    prompt = bench.prompt(visible, memory=False)
    expected = encode_chat(load_tokenizer("qwen3"), list(prompt.messages), prompt.tools, True)
    assert record.ids[: len(expected)] == expected and not any(record.loss_mask[: len(expected)])
    assert record.num_sampled > 0
    one, metrics = tmp_path / "mine.jsonl", tmp_path / "m.json"
    one.write_text(json.dumps(mine) + "\n")
    scoring = [sys.executable, str(ROOT / "launch" / "eval.py"), "--data", str(small_benchmark)]
    scoring += ["--records", str(one), "--split", "test", "--json", str(metrics)]
    scored = subprocess.run(scoring, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert scored.returncode == 0, scored.stderr[-3000:]
    verdict = bench.evaluate(record.answer, visible, truth)
    scores = json.loads(metrics.read_text())
    assert scores["n"] == 1 and scores["delivery_rate"] == float(verdict.delivered)


def _generated(base: str) -> int:
    return json.loads(urllib.request.urlopen(base + "/v1/stats").read())["generated_tokens"]


def test_a_client_that_leaves_cancels_its_completion(server):
    """A client asks for 3,000 greedy tokens (250 pieces of the 12-token segment) and leaves once
    decoding is under way: the engine stops within a piece or two, far short of 3,000."""
    base = server[0]
    start = _generated(base)
    body = json.dumps(
        {"messages": [{"role": "user", "content": "Go on."}], "max_tokens": 3000, "temperature": 0}
    ).encode()
    head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    with socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1]))) as sock:
        sock.sendall(head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        deadline = time.monotonic() + 120
        while _generated(base) < start + 48:  # four pieces decoded: the completion is under way
            assert time.monotonic() < deadline
            time.sleep(0.1)
    settled, now = -1, _generated(base)
    while now != settled:  # the engine goes idle once the cancelled request's last piece ends
        settled, now = now, (time.sleep(1.5), _generated(base))[1]
    assert start + 48 <= settled < start + 3000


def test_streaming_and_concurrent_clients(client):
    """A streamed reply, greedy or sampled, has the same tokens as the same request unstreamed, and
    its content deltas add up to that reply's content; they arrive as the server's 4-step stream
    segments decode (40 tokens: 10 segments, 4 pieces of the engine's 12-token segment), more often
    than once a piece."""
    messages = [{"role": "user", "content": "stream"}]
    usage = {"include_usage": True}
    for sampling in ({"temperature": 0}, {"temperature": 1.0, "seed": 11}):
        request = dict(model="b2tjax", messages=messages, max_tokens=40, **sampling)
        chunks = list(client.chat.completions.create(**request, stream=True, stream_options=usage))
        whole = client.chat.completions.create(**request).choices[0]
        assert chunks[0].choices[0].delta.role == "assistant"
        assert chunks[-1].usage is not None and chunks[-2].choices[0].finish_reason == whole.finish_reason
        assert chunks[-2].choices[0].model_extra["token_ids"] == whole.model_extra["token_ids"]
        streamed = [c.choices[0].delta.content for c in chunks[1:-2] if c.choices[0].delta.content]
        assert "".join(streamed) == whole.message.content
        assert len(streamed) > 4 or len(whole.model_extra["token_ids"]) <= 24

    def ask(k: int) -> list[int]:
        messages = [{"role": "user", "content": f"question {k % 3}"}]
        reply = client.chat.completions.create(model="b2tjax", messages=messages, temperature=0, max_tokens=4)
        return reply.choices[0].model_extra["token_ids"]

    with concurrent.futures.ThreadPoolExecutor(100) as pool:  # 100 connections at once
        answers = list(pool.map(ask, range(100)))
    # greedy: the same question gets the same tokens whichever batch mates it had
    for k in range(3, 100):
        assert answers[k] == answers[k % 3]


def test_grpo_trains_on_served_sessions(client, server, hf_dir):
    """Two recorded sessions of one task, scored at close, are a GRPO group: the served log-probs
    of their sampled tokens are the model's own (teacher-forced, at the request's temperature), so
    the update is on-policy, and it moves the weights."""
    import dataclasses

    import jax
    import numpy as np
    import optax

    from b2tjax.config import TrainConfig
    from b2tjax.grpo.update import RolloutBatch, UpdateSpec, grpo_update
    from b2tjax.run.policy import load_policy
    from b2tjax.step.train_step import BoundModel, init_train_state, make_step_fns
    from rollout.sampling import teacher_forced_logprobs

    base, records = server
    for name, reward in (("g0", 0.0), ("g1", 1.0)):
        messages = [{"role": "user", "content": "Plan a day in Chengdu."}]
        headers = {"X-Session-Id": name, "X-Instance-Id": f"task-{name}"}
        for turn in range(2):
            reply = client.chat.completions.create(
                model="b2tjax", messages=messages, temperature=0.9, seed=turn, extra_headers=headers
            )
            messages += [
                reply.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "content": "ok"},
            ]
        assert _post(f"{base}/v1/sessions/{name}/close", json.dumps({"reward": reward}).encode())[0] == 200
    lines = [EpisodeRecord.from_json(json.loads(x)) for x in records.read_text().splitlines()]
    group = [r for r in lines if r.instance_id.startswith("task-") and r.stream == "main"]
    assert [r.reward for r in group] == [0.0, 1.0]

    model = load_policy(hf_dir).model
    for record in group:
        mask = np.asarray(record.loss_mask[1:], bool)
        reference = teacher_forced_logprobs(model, record.ids, 0.9)[mask]
        assert np.max(np.abs(np.asarray(record.logprobs[1:])[mask] - reference)) <= 2e-3

    cfg = TrainConfig()
    cfg.rollout = dataclasses.replace(cfg.rollout, prompts_per_step=1, group_size=2, max_seq_len=512)
    model_fn, params = BoundModel.from_model(model)
    fns = make_step_fns(model_fn, optax.sgd(1.0), lambda s: 1.0, cfg.grpo, temperature=0.9, fixed_length=512)
    state = init_train_state(jax.tree.map(lambda x: x.copy(), params), optax.sgd(1.0))
    spec = UpdateSpec.of(cfg.grpo, cfg.rollout, cfg.rollout_batch, 1)
    new, metrics = grpo_update(
        spec, fns, state, RolloutBatch(group, {}, groups=[0, 0], episodes=[0, 1]), seed=0
    )
    moved = jax.tree.map(lambda a, b: float(np.abs(np.asarray(a) - np.asarray(b)).max()), new.params, params)
    assert max(jax.tree.leaves(moved)) > 0 and metrics["clip_frac"] == 0.0

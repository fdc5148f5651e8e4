"""The endpoint's pieces without a server: an agent's resent conversation continues the exact ids
the server sampled (TurnCache), a session's turns extend one record (SessionBook), requests are
checked into OpenAI-style errors (parse_chat), and a streamed reply's deltas add up to the finished
message (TextDeltas)."""

from __future__ import annotations

import json

import pytest

from models.chat import encode_chat
from models.tokenizer import load_tokenizer
from rollout.record import EpisodeRecord
from rollout.serve.chat import TurnCache, assistant_message
from rollout.serve.deltas import TextDeltas
from rollout.serve.schema import ApiError, parse_chat
from rollout.serve.sessions import SessionBook
from sandbox.types import StopReason
from tests.rollout_fixtures import rollout_setup  # noqa: F401  (session fixture)


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("qwen3")


def test_a_resent_conversation_continues_the_sampled_ids(tok):
    """The model sampled "hello" as single letters: re-encoding the text would give other ids; the
    next prompt keeps the sampled ones, then the tool reply, as the template renders it."""
    messages = [{"role": "user", "content": "say hello"}]
    prompt = encode_chat(tok, messages, None, add_generation_prompt=True)
    sampled = [t for ch in "hello" for t in tok.encode(ch)] + [tok.im_end_id]
    assert sampled[:-1] != tok.encode("hello")  # the drift a re-encoding would bring
    reply, _ = assistant_message("hello", parse_tools=True)
    cache = TurnCache()
    cache.put([*messages, reply], None, prompt + sampled)
    more = [*messages, reply, {"role": "tool", "content": "ok"}]
    ids = cache.prompt_ids(tok, more, None)
    assert ids[: len(prompt) + len(sampled)] == prompt + sampled
    assert tok.decode(ids) == tok.decode(encode_chat(tok, more, None, add_generation_prompt=True))
    # a conversation the server never answered is encoded whole
    other = [*messages, {"role": "assistant", "content": "bye"}, {"role": "tool", "content": "ok"}]
    assert cache.prompt_ids(tok, other, None) == encode_chat(tok, other, None, add_generation_prompt=True)


def _turn(prompt: list[int], sampled: list[int]) -> EpisodeRecord:
    record = EpisodeRecord("x")
    record.append(prompt, sampled=False)
    record.append(sampled, sampled=True, logprobs=[-0.5] * len(sampled))
    record.stop_reason = StopReason.DONE
    return record


def test_a_session_is_one_episode_record(tmp_path):
    book = SessionBook(tmp_path / "s.jsonl", "qwen3")
    book.add("s", "inst", [1, 2], _turn([1, 2], [3, 4]))
    book.add("s", "inst", [1, 2, 3, 4, 5], _turn([1, 2, 3, 4, 5], [6]))  # continues the record
    book.add("s", "inst", [9], _turn([9], [7]))  # rewritten history: another stream
    book.close("s", "the plan", 1.0)
    lines = [EpisodeRecord.from_json(json.loads(x)) for x in (tmp_path / "s.jsonl").read_text().splitlines()]
    main, branch = lines
    assert main.ids == [1, 2, 3, 4, 5, 6] and main.loss_mask == [0, 0, 1, 1, 0, 1]
    assert main.logprobs == [0, 0, -0.5, -0.5, 0, -0.5] and main.turns == [(2, 4), (5, 6)]
    assert (main.answer, main.stop_reason, main.reward, main.instance_id) == (
        "the plan",
        StopReason.ANSWER,
        1.0,
        "inst",
    )
    assert branch.stream == "branch1" and branch.role == "branch" and branch.episode == main.episode
    with pytest.raises(KeyError):
        book.close("s", None, None)


_WITH_TOOL = {
    "messages": [{"role": "user", "content": "x"}],
    "tools": [{"type": "function", "function": {"name": "FlightSearch", "parameters": {}}}],
}


_USER = {"messages": [{"role": "user", "content": "x"}]}


@pytest.mark.parametrize(
    "body, status, param",
    [
        ([], 400, None),
        ({"messages": []}, 400, "messages"),
        ({"messages": [{"role": "user", "content": 3}]}, 400, "messages"),
        ({"model": "other", "messages": [{"role": "user", "content": "x"}]}, 404, "model"),
        ({"messages": [{"role": "user", "content": "x"}], "n": 0}, 400, "n"),
        ({"messages": [{"role": "user", "content": "x"}], "top_p": 0}, 400, "top_p"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": "9"}, 400, "max_tokens"),
        ({"messages": [{"role": "user", "content": "x"}], "stop": [1]}, 400, "stop"),
        ({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}, 400, "tool_choice"),
        ({**_WITH_TOOL, "tool_choice": {"type": "function", "function": {"name": "X"}}}, 400, "tool_choice"),
        ({**_WITH_TOOL, "tool_choice": {"type": "function"}}, 400, "tool_choice"),
        ({**_WITH_TOOL, "tool_choice": "always"}, 400, "tool_choice"),
        ({**_USER, "logprobs": True, "top_logprobs": 21}, 400, "top_logprobs"),
        ({**_USER, "top_logprobs": 2}, 400, "top_logprobs"),
    ],
)
def test_bad_requests_are_refused_with_their_field(body, status, param):
    with pytest.raises(ApiError) as err:
        parse_chat(body, "b2tjax")
    assert err.value.status == status and err.value.param == param


def test_a_request_reads_openai_fields():
    body = {
        "model": "b2tjax",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
        ],
        "max_completion_tokens": 7,
        "stop": "END",
        "tool_choice": "none",
        "stream": True,
        "stream_options": {"include_usage": True},
        "logprobs": True,
        "top_logprobs": 5,
        "unknown_field": 1,
    }
    req = parse_chat(body, "b2tjax")
    assert req.messages[0]["content"] == "ab" and req.max_tokens == 7 and req.stop == ("END",)
    assert not req.parse_tools and req.stream and req.include_usage and req.temperature == 1.0
    assert req.logprobs and req.top_logprobs == 5


def test_tool_choice_opens_the_call_the_model_completes(tok):
    """ "required" gives the model a call's opening and a named function also its name (decoding is
    not constrained); the completion the model samples after it is parsed as that tool's call, and
    the opening is what Qwen3's template writes for a call."""
    required = parse_chat({**_WITH_TOOL, "tool_choice": "required"}, "b2tjax")
    named = parse_chat(
        {**_WITH_TOOL, "tool_choice": {"type": "function", "function": {"name": "FlightSearch"}}}, "b2tjax"
    )
    assert required.parse_tools and required.call_start == "<tool_call>\n"
    sampled = '{"origin": "Rome"}}\n</tool_call>'
    message, calls = assistant_message(named.call_start + sampled, named.parse_tools)
    assert calls and message["content"] is None
    assert message["tool_calls"][0]["function"] == {"name": "FlightSearch", "arguments": '{"origin": "Rome"}'}
    call = {"role": "assistant", "content": None, "tool_calls": [message["tool_calls"][0]]}
    written = encode_chat(tok, [{"role": "user", "content": "x"}, call])
    assert tok.decode(written).count(named.call_start) == 1  # the template opens a call alike
    assert parse_chat(_WITH_TOOL, "b2tjax").call_start == ""  # auto: the model chooses


CALL = '<tool_call>\n{"name": "FlightSearch", "arguments": {"to": "Rome"}}\n</tool_call>'


@pytest.mark.parametrize(
    "text, parse_tools, stops",
    [
        ("<think>\nweigh the <b> fares\n</think>\n\nThe 9:00 flight. " + CALL + " then more", True, ()),
        ("  Plain answer, <tool_call> not parsed </tool_call> here.  ", False, ()),
        ("Answer one. END and what follows", True, ("END",)),
        ("<think>\ncut while reasoning <", True, ()),
        ("Half <tool_call>\n{broken", True, ()),
        ("caf\u00e9 \U0001f600 ok", True, ()),
        ("bytes \ufffd that never formed a character \ufffd\ufffd stay", True, ()),
    ],
)
def test_streamed_deltas_add_up_to_the_finished_message(text, parse_tools, stops):
    """The completion's text grows a character at a time (as pieces decode); every delta sent is
    final, so their concatenation per field is the non-streamed message's field, tool calls last."""
    deltas = TextDeltas(parse_tools, stops)
    sent = []
    for end in range(len(text) + 1):
        sent += deltas.update(text[:end] + ("\ufffd" if end % 3 == 0 else ""))  # a character mid-decode
    body = text[: min([text.find(s) for s in stops if s in text] or [len(text)])]
    message, _ = assistant_message(body, parse_tools)
    sent += deltas.finish(message)
    for field in ("reasoning_content", "content"):
        assert "".join(d.get(field, "") for d in sent) == (message.get(field) or "")
    assert [d for d in sent if "tool_calls" in d] == ([sent[-1]] if "tool_calls" in message else [])
    assert sum("content" in d for d in sent) > 1 or not message["content"]  # streamed, not at the end


@pytest.mark.slow  # a tiny engine's decode programs for 32 and 4 steps: ~10 s on 2 cores
def test_a_streamed_reply_reports_every_segment_and_samples_the_same_tokens(rollout_setup):  # noqa: F811
    """A streamed request (segment 4) beside a plain one: the worker reports its row's tokens every
    4 steps, and both records, sampled at temperature 1, are the ones each request gets alone with
    the engine's own 32-token segment (sampling keys follow positions, never segments; log-probs up
    to fp32 rounding: the two segment lengths are two compiled programs)."""
    from rollout import RolloutEngine
    from rollout.sampling import StreamSampling
    from rollout.serve.worker import EngineWorker, ServedEpisode
    from tests.rollout_fixtures import engine_config, user_prompt

    tok, model = rollout_setup.tokenizer, rollout_setup.model
    config = engine_config(max_turn_tokens=32, turn_cap="stop")
    prompts = [user_prompt(tok, text)[1] for text in ("Plan a trip to Chengdu.", "Hotels in Beijing?")]
    worker = EngineWorker(RolloutEngine(model, tok, config), rng=0)
    try:

        def run(segments: list[int | None]) -> tuple[list[EpisodeRecord], list[int]]:
            seen: list[int] = []
            episodes = [
                ServedEpisode(f"r{i}", p, 32, StreamSampling(1.0, seed=7 + i, segment=s), seen.append)
                for i, (p, s) in enumerate(zip(prompts, segments))
            ]
            episodes[1].on_tokens = None  # the plain request: nobody listens
            return [f.result(timeout=120) for f in worker.submit(episodes)], [len(ids) for ids in seen]

        (streamed, plain), lengths = run([4, None])
        (alone, _), _ = run([None, None])
        (_, plain_alone), _ = run([None, None])
    finally:
        worker.close()
    assert streamed.ids == alone.ids and plain.ids == plain_alone.ids
    assert streamed.logprobs == pytest.approx(alone.logprobs, rel=1e-5, abs=1e-6)
    assert plain.logprobs == pytest.approx(plain_alone.logprobs, rel=1e-5, abs=1e-6)
    sampled = len(streamed.ids) - len(prompts[0])
    expected = [len(prompts[0]) + n for n in range(4, sampled, 4)] + [len(streamed.ids)]
    assert lengths == expected[: len(lengths)] and len(lengths) >= len(expected) - 1 > 0


@pytest.mark.parametrize("exported", [False, True])
def test_streamed_text_is_final_for_byte_tokens(rollout_setup, exported, tmp_path):  # noqa: F811
    """Byte tokens among pieces: with the Hugging Face export of a SentencePiece model (its
    byte-fallback decoder turns a byte valid alone into a replacement character beside an invalid
    one), the text of every prefix is not a prefix of the whole; `stable_text` of every prefix is,
    grows with it, and is the whole once a piece follows the last byte."""
    from models.tokenizer import load_tokenizer
    from rollout.serve.deltas import stable_text

    tok = rollout_setup.tokenizer
    if exported:
        tok.save_hf(tmp_path)
        tok = load_tokenizer(tmp_path)
    byte = {b: tok.token_to_id(f"<0x{b:02X}>") for b in (0x01, 0x02, 0x8F, 0xE4, 0xB8, 0x80)}
    word = tok.encode(" trip")
    ids = word + [byte[0x01], byte[0x8F]] + word + [byte[0xE4], byte[0xB8], byte[0x80]]
    ids += word + [byte[0x01], byte[0x02]] + word
    whole = tok.decode(ids)
    if exported:  # what streaming the plain text would get wrong
        assert not whole.startswith(tok.decode(ids[: len(word) + 1]))
    texts = [stable_text(tok.decode, ids[:n]) for n in range(len(ids) + 1)]
    assert all(whole.startswith(t) for t in texts)
    assert all(b.startswith(a) for a, b in zip(texts, texts[1:]))
    assert stable_text(tok.decode, ids + word) == whole and "\u4e00" in whole

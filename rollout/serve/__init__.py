"""An OpenAI-compatible chat endpoint on the rollout engine (launch/serve.py, docs/guides/serve.md).

schema.py reads and checks a request, chat.py turns messages into the exact tokens the records use
and a completion back into OpenAI's message (reasoning, tool calls), worker.py feeds concurrent
requests into one streaming engine session, sessions.py records an outside agent's session as one
episode, app.py is the HTTP layer (the optional `serve` extra: starlette + uvicorn).
"""

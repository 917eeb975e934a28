"""The dispatch lanes' Lua scripts (enqueue, claim, hold, finish, release, policy, rebuild, explain), read
from the `.lua` files beside this module: one library of shared functions (lib.lua) and each script's body.

Keys and their meaning: app/dispatch/lanes.py. Each file's header says what its script takes and answers.
"""

from __future__ import annotations

from importlib import resources


def lua(name: str) -> str:
    """The text of `lua/{name}.lua`, read as package data (it ships in the wheel beside this module)."""
    return resources.files("app.dispatch").joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")


# What every claim script hands back for a claimed message, so the worker starts it without arq's own round
# trip for it (running.py): its id, its score, its body ('' once expired), arq's try count (counted
# here, as arq's run_job would) and whether an abort was asked for before it started (when `aborts`).
CLAIMED_FIELDS = 5
RETRY_KEY_TTL_S = 88400  # how long arq keeps a message's try count (arq.worker.Worker.run_job's own figure)
_CLAIMED_CONSTANTS = f"local CLAIMED_FIELDS, RETRY_KEY_TTL_S = {CLAIMED_FIELDS}, {RETRY_KEY_TTL_S}\n"
CLAIMED_MESSAGE_LUA = _CLAIMED_CONSTANTS + lua("claimed_message")

_LIB = lua("lib")
_POLICY_BODY = lua("policy_body")
ENQUEUE_LUA = _LIB + lua("enqueue")
EXPLAIN_LUA = _LIB + lua("explain")
CLAIM_LUA = _LIB + CLAIMED_MESSAGE_LUA + lua("claim")
HOLD_LUA = _LIB + lua("hold")
FINISH_LUA = _LIB + lua("finish")
RELEASE_LUA = _LIB + lua("release")
POLICY_LUA = _LIB + _POLICY_BODY + lua("policy")
REBUILD_LUA = _LIB + _POLICY_BODY + lua("rebuild")
# The dead-letter consumer's queue has no lanes: it is claimed in time order, as arq does.
QUEUE_CLAIM_LUA = CLAIMED_MESSAGE_LUA + lua("queue_claim")

"""Dispatch: how a report job travels through Redis. Its messages and lanes (priority, fair share, caps,
pauses), the claim, holding and freeing slots, and running a claimed message; the Lua lives in `lua/`.
"""

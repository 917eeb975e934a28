"""Destinations: where finished reports and owners' notices go (DingTalk, Feishu, WeCom robots, email over
SMTP, a signed webhook), per tenant; the durable per-destination deliveries and what sends them.
"""

"""A small orders service: the team's own Kafka consumer, tested by kafka-chaos as an ``app`` member.

``shop.orders`` is the service (its own poll loop, commit policy and rebalance listener);
``shop.commit_early`` and ``shop.keeps_revoked`` are two deliberately broken variants of it, each
caught by a kafka-chaos checker (see ../README.md).
"""

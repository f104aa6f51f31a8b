"""Entry point of a worker process: ``python -m chaos.workload.worker CONFIG.json``.

One process per producer and per group member, so faults can kill and freeze
them for real. The config is a :class:`chaos.workload.spec.WorkerConfig`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from chaos.workload.spec import WorkerConfig


def main(argv: list[str]) -> int:
    cfg = WorkerConfig.model_validate_json(Path(argv[1]).read_text())
    if cfg.role == "producer":
        from chaos.workload.producer import run_producer
        return run_producer(cfg)
    from chaos.model.workload import Client
    from chaos.workload.libraries import check_imported

    if cfg.share_member is not None and cfg.share_member.client is Client.JAVA:
        from chaos.workload.clients.java_share import run_java_share_member

        return run_java_share_member(cfg)
    if cfg.share_member is not None:
        from chaos.workload.share_member import run_share_member

        check_imported(cfg.share_member)
        return run_share_member(cfg.name, cfg.group, cfg.topic, cfg.bootstrap, cfg.run_dir, cfg.share_member,
                                cfg.share_lock_ms)

    if cfg.consumer is not None:
        check_imported(cfg.consumer)
    if cfg.consumer is not None and cfg.consumer.app is not None:
        from chaos.workload.application import run_app
        return run_app(cfg)
    if cfg.consumer is not None and cfg.consumer.client is Client.JAVA:
        from chaos.workload.clients.java import run_java_consumer
        return run_java_consumer(cfg)
    from chaos.workload.consumer import run_consumer
    return run_consumer(cfg)


if __name__ == "__main__":
    sys.exit(main(sys.argv))

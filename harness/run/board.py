"""The Ray executor's board: an actor on the head node that remembers where each point last
started ("host/node-id"), so a point whose node vanished can still be named.

A module of its own that imports nothing: the worker Ray starts for the actor imports the
actor's module, and the executor's would cost it torch and the harness (about 4 s of CPU
per sweep) to keep a dictionary.
"""

from __future__ import annotations


class Board:
    def __init__(self) -> None:
        self.nodes: dict[str, str] = {}

    def started(self, point_id: str, node: str) -> None:
        self.nodes[point_id] = node

    def node(self, point_id: str) -> str | None:
        return self.nodes.get(point_id)

"""Structural measurements of a layer's computation: they depend on what is computed from
what, not on the device or on timings.

The unit is one op = one autograd Node (a backward function such as MulBackward0 or
AddmmBackward0; one per differentiable torch call, a few for a composite like F.linear on
3-D input). AccumulateGrad nodes, which stand for leaf tensors (inputs, parameters), are not
ops and count 0 everywhere.

- graph_depth / sequential_ops: the longest chain of dependent ops, Table 1's "sequential
  operations". Only an explicit loop shows its length: a fused RNN kernel is one node
  whatever n is, so recurrent layers must be measured through rnn_impl="cell".
- max_path_length: the fewest stacked layers through which y[n-1] depends on x[0], decided
  from exact gradients.
- path_ops / recurrent_path_length: the shortest chain of ops from x[0] to y[n-1] inside one
  layer, and for a recurrent layer the time steps on that chain. Stacking recurrent layers
  is no measure of their path: one layer already connects x[0] to y[n-1], through n-1
  applications of its cell, and those are what the paper counts.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

Node = Any  # torch.autograd.graph.Node; C++ nodes are not instances of it at runtime


def _children(node: Node) -> Iterator[tuple[int, Node, int]]:
    """(edge index, child node, child's output index) for every input edge of node."""
    for i, (child, output_nr) in enumerate(node.next_functions):
        if child is not None:
            yield i, child, output_nr


def _is_leaf(node: Node) -> bool:
    return isinstance(node, torch._C._functions.AccumulateGrad)


def _postorder(root: Node) -> list[Node]:
    """Every node reachable from root, each after all of its children. Iterative: an RNN
    over thousands of steps makes chains far deeper than Python's recursion limit."""
    order: list[Node] = []
    seen: set[Node] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        stack.append((node, True))
        # a DAG cannot reach a node that is still open, so children finish before the parent
        stack.extend((child, False) for _, child, _ in _children(node) if child not in seen)
    return order


def graph_depth(output: torch.Tensor) -> int:
    """Ops on the longest chain of autograd nodes ending in output.grad_fn (0 if none).

    Memoised longest path over the DAG; AccumulateGrad leaves count 0.
    """
    if output.grad_fn is None:
        return 0
    depth: dict[Node, int] = {}
    for node in _postorder(output.grad_fn):
        below = max((depth[child] for _, child, _ in _children(node)), default=0)
        depth[node] = below + (0 if _is_leaf(node) else 1)
    return depth[output.grad_fn]


def _probe(mixer: nn.Module, n: int, d: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """x[1, n, d] on the mixer's device, requiring grad (so its uses become graph nodes)."""
    p = next(mixer.parameters(), None)
    device = p.device if p is not None else None
    dtype = dtype or (p.dtype if p is not None else torch.get_default_dtype())
    return torch.randn(1, n, d, device=device, dtype=dtype, requires_grad=True)


def sequential_ops(mixer: nn.Module, n: int, d: int) -> int:
    """graph_depth of one forward of mixer on x[1, n, d]: Table 1's sequential operations.

    Call it on an LSTM/GRU built with rnn_impl="cell": the fused kernel runs its loop inside
    one node and would read as depth O(1).
    """
    return graph_depth(mixer(_probe(mixer, n, d)))


def _reaches(module: nn.Module, n: int, d: int) -> bool:
    """Does y[n-1] depend on x[0]? d(v . y[n-1]) / d x[0] != 0 for a random v, in float64.

    Structural independence gives exact zeros (a masked score has weight exactly 0, a
    convolution's transpose sums exact zeros), so `!= 0` is the test, not a tolerance; a
    random v rules out a cancellation among output channels (probability 0).
    """
    x = _probe(module, n, d, torch.float64)
    y = module(x)  # (1, n, d)
    cotangent = torch.zeros_like(y)
    cotangent[0, n - 1] = torch.randn(d, dtype=torch.float64, device=y.device)
    (grad,) = torch.autograd.grad(y, x, cotangent, allow_unused=True)
    return grad is not None and bool((grad[0, 0] != 0).any())


def max_path_length(make_layer: Callable[[int], nn.Module], n: int, d: int,
                    max_depth: int) -> int | None:
    """The fewest stacked layers L in 1..max_depth through which y[n-1] depends on x[0].

    make_layer(i) builds a fresh layer for index i of the stack (0 nearest the input), so a
    dilated stack can grow its dilation; a new stack of L layers is built for each L and run
    in float64. None if max_depth layers do not reach.
    """
    for depth in range(1, max_depth + 1):
        stack = nn.Sequential(*(make_layer(i) for i in range(depth))).double()
        if _reaches(stack, n, d):
            return depth
    return None


class _Recorder(TorchFunctionMode):
    """Keeps every tensor that a torch call returns during a forward, in call order."""

    def __init__(self) -> None:
        super().__init__()
        self.tensors: list[torch.Tensor] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        self.tensors.extend(t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor))
        return out


Tensor = tuple[Node, int]  # a tensor of the graph: the node that made it, its output index


class _Trace:
    """One recorded float64 forward of a copy of layer on x[1, n, d], and the questions that
    need its graph: which tensors depend on x[t], which edges carry y[n-1]'s gradient.

    Dependence on x[t] is found by running the forward again with only x[t] changed and
    comparing every tensor a torch call returned (exactly: a random change moves every value
    that depends on it). A tensor made inside one C++ call, which the comparison cannot see,
    is taken to depend if any of its inputs does. Both dependence and gradients are judged
    per tensor, so two positions travelling in one tensor are told apart only where Python
    code splits them (indexing, chunk, stack): where a recurrence takes its per-step inputs
    and collects its outputs.
    """

    def __init__(self, layer: nn.Module, n: int, d: int, seed: int) -> None:
        self.layer, self.n, self.d, self.seed = copy.deepcopy(layer).double(), n, d, seed
        self.x = _probe(self.layer, n, d, torch.float64)
        self.y, self.tensors = self._forward(self.x)
        self.nodes = _postorder(self.y.grad_fn) if self.y.grad_fn is not None else []

    def _forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        recorder = _Recorder()
        with torch.random.fork_rng(devices=[]), recorder:
            torch.manual_seed(self.seed)  # a random op (dropout) draws the same in every run
            y = self.layer(x)
        return y, recorder.tensors

    def depends_on(self, t: int) -> Callable[[Node, int], bool]:
        """depends(node, output_nr): does that tensor change when x[t] does?"""
        moved = self.x.detach().clone()
        moved[0, t] += torch.randn(self.d, dtype=moved.dtype, device=moved.device)
        _, tensors = self._forward(moved.requires_grad_())
        if len(tensors) != len(self.tensors):
            raise RuntimeError("the forward took a different course when x[t] changed; "
                               "structure needs a data-independent sequence of torch calls")
        changed: dict[Tensor, bool] = {}
        for a, b in zip(self.tensors, tensors, strict=True):
            if a.grad_fn is not None:
                key = (a.grad_fn, a.output_nr)
                changed[key] = changed.get(key, False) or not torch.equal(a, b)
        any_input: dict[Node, bool] = {}  # does some input of the node depend on x[t]?

        def depends(node: Node, output_nr: int) -> bool:
            return changed.get((node, output_nr), any_input[node])

        for node in self.nodes:  # children first
            any_input[node] = (node.variable is self.x if _is_leaf(node)
                               else any(depends(c, k) for _, c, k in _children(node)))
        return depends

    def live_edges(self) -> dict[Node, set[int]] | None:
        """node -> indices of its input edges that carry a non-zero gradient from
        v . y[n-1] (random v), read with node hooks; None if x[0] gets no gradient."""
        live: dict[Node, set[int]] = {}

        def hook(node: Node) -> Callable[..., None]:
            def record(grad_inputs: tuple, _grad_outputs: tuple) -> None:
                live[node] = {i for i, g in enumerate(grad_inputs)
                              if g is not None and bool(g.any())}
            return record

        handles = [node.register_hook(hook(node)) for node in self.nodes if not _is_leaf(node)]
        try:
            cotangent = torch.zeros_like(self.y)
            cotangent[0, self.n - 1] = torch.randn(self.d, dtype=self.y.dtype,
                                                   device=self.y.device)
            (grad,) = torch.autograd.grad(self.y, self.x, cotangent, allow_unused=True)
        finally:
            for handle in handles:
                handle.remove()
        return live if grad is not None and bool((grad[0, 0] != 0).any()) else None

    def shortest_chain(self) -> list[Tensor] | None:
        """The tensors, from y down, on the shortest chain of ops through which y[n-1]
        depends on x[0] (one tensor per op); None if it does not depend.

        An edge is on such a chain when it carries y[n-1]'s gradient and its tensor
        depends on x[0]; breadth-first search from y finds the chain with fewest ops.
        """
        live = self.live_edges() if self.nodes else None
        if live is None:
            return None
        depends = self.depends_on(0)
        root: Tensor = (self.y.grad_fn, self.y.output_nr)
        parent: dict[Node, Tensor | None] = {root[0]: None}
        queue = deque([root])
        while queue:
            node, output_nr = queue.popleft()
            for i, child, k in _children(node):
                if i not in live.get(node, ()) or not depends(child, k):
                    continue
                if _is_leaf(child):  # only x's leaf depends on x[0]
                    chain, at = [], (node, output_nr)
                    while at is not None:
                        chain.append(at)
                        at = parent[at[0]]
                    return chain[::-1]
                if child not in parent:
                    parent[child] = (node, output_nr)
                    queue.append((child, k))
        raise RuntimeError("x[0] receives a gradient from y[n-1] but no live chain was found")


def path_ops(layer: nn.Module, n: int, d: int, seed: int = 0) -> int | None:
    """Ops on the shortest chain through which y[n-1] depends on x[0] in one forward of
    layer on x[1, n, d] (float64, on a copy of layer); None if it does not depend.

    A shortest path, where graph_depth measures the longest; see _Trace for how dependence
    and gradients are judged.
    """
    chain = _Trace(layer, n, d, seed).shortest_chain()
    return None if chain is None else len(chain)


def recurrent_path_length(layer: nn.Module, n: int, d: int, seed: int = 0) -> int | None:
    """Time steps between x[0] and y[n-1]: on the shortest chain of ops from x[0] to y[n-1],
    the number of positions t >= 1 whose input x[t] the chain takes in along the way.

    Each tensor on the chain gets the last position it depends on (found by changing x[t]
    for every t); the answer is the number of distinct such positions less one. A recurrent
    layer (rnn_impl="cell") takes in one position per application of its cell, so this
    counts cell applications after the one that reads x[0], measured rather than assumed: a
    shortcut across steps would show fewer. A fused RNN kernel reads 0: it hides its loop
    inside one node. Meant for recurrent layers: full attention and convolution mix all
    positions in whole tensors and read 0, a blocked layer (restricted attention) counts its
    block boundaries; their path length is max_path_length's, in layers. O(n) forwards.
    None if y[n-1] does not depend on x[0].
    """
    trace = _Trace(layer, n, d, seed)
    chain = trace.shortest_chain()
    if chain is None:
        return None
    last: dict[Tensor, int] = {}
    for t in range(n):
        depends = trace.depends_on(t)
        last.update({tensor: t for tensor in chain if depends(*tensor)})
    return len(set(last.values())) - 1

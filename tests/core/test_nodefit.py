"""nodefit: Karmada's resource-model grades, allocatableModelings, and first-fit on virtual nodes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.nodefit import (DEFAULT_GRADES, UNBOUNDED, NodeShapes, allocatable_modelings, grade_of,
                                 max_replicas, pack, reserve, shapes_of)
from engine.resources import CPU, GPU, MEMORY, PODS

GI = 1 << 30
GPU_GRADES = [{GPU: 0}, {GPU: 1}, {GPU: 2}, {GPU: 4}, {GPU: 8}]      # [0,1),[1,2),[2,4),[4,8),[8,inf)


def gpus(shapes: NodeShapes) -> list[tuple[int, int]]:
    """(free GPUs per node, nodes) in the shapes' order."""
    return [(dict(vec).get(GPU, 0), n) for vec, n in shapes.nodes]


def worked_example() -> list[int]:
    """node-shape.md section 6: 4 nodes x 8 GPUs, one running 5-GPU pod on each."""
    nodes = [({GPU: 8, CPU: 64000, PODS: 110}, [{GPU: 5, CPU: 1000}]) for _ in range(4)]
    return allocatable_modelings(GPU_GRADES, nodes)


def test_worked_example_counts_match_karmada() -> None:
    assert worked_example() == [0, 0, 4, 0, 0]


def test_worked_example_replicas_match_the_model_path_table() -> None:
    shapes = shapes_of(GPU_GRADES, worked_example())
    assert gpus(shapes) == [(2, 4)]
    assert max_replicas(shapes, {GPU: 8}) == 0          # true per-node fit 0 (totals said 1)
    assert max_replicas(shapes, {GPU: 3}) == 0          # grade min 2 < 3: the model underestimates
    assert max_replicas(shapes, {GPU: 2}) == 4          # totals said 6
    assert max_replicas(shapes, {GPU: 1}) == 8          # lower edge 2 per node
    # cpu is not graded: no per-node limit from it here (the caller checks totals); Karmada >= 1.18 says 0
    assert max_replicas(shapes, {CPU: 32000, GPU: 1}) == 8
    assert max_replicas(shapes, {CPU: 32000}) == UNBOUNDED


def test_a_node_without_gpus_is_grade_zero() -> None:
    nodes = [({GPU: 8}, [{GPU: 5}])] * 4 + [({CPU: 8000}, [])]
    assert allocatable_modelings(GPU_GRADES, nodes) == [1, 0, 4, 0, 0]


def test_default_grades_are_joint_over_cpu_and_memory() -> None:
    assert len(DEFAULT_GRADES) == 9 and DEFAULT_GRADES[0] == {CPU: 0, MEMORY: 0}
    assert DEFAULT_GRADES[8] == {CPU: 128000, MEMORY: 1024 * GI}
    # 6 cpu -> grade 3 (min 4); 20Gi -> grade 2 (min 16Gi): the node is grade 2, the scarcer one
    assert grade_of({CPU: 6000, MEMORY: 20 * GI}, DEFAULT_GRADES) == 2
    assert grade_of({CPU: 500_000, MEMORY: 4096 * GI}, DEFAULT_GRADES) == 8     # last grade is open-ended
    assert grade_of({}, DEFAULT_GRADES) == 0


def test_pod_full_nodes_are_skipped_not_a_break() -> None:
    """Karmada's `break` (#7757) would drop every node after a pod-full one; Atoll skips just that node."""
    full = ({GPU: 8, PODS: 1}, [{GPU: 1}])
    free: tuple[dict[str, int], list[dict[str, int]]] = ({GPU: 8, PODS: 110}, [])
    assert allocatable_modelings(GPU_GRADES, [full, free, free]) == [0, 0, 0, 0, 2]


def test_terminal_pods_are_the_callers_business_and_bound_requests_subtract() -> None:
    nodes = [({CPU: 16000, MEMORY: 64 * GI}, [{CPU: 9000, MEMORY: 8 * GI}])]
    # 7 cpu free -> grade 3 (min 4); 56Gi -> grade 3 (min 32): grade 3
    assert allocatable_modelings(DEFAULT_GRADES, nodes) == [0, 0, 0, 1, 0, 0, 0, 0, 0]


def test_from_models_keys_by_grade_number() -> None:
    shapes = NodeShapes.from_models({4: {GPU: 8}, 0: {GPU: 0}, 2: {GPU: 2}}, {2: 3, 4: 1, 9: 5})
    assert gpus(shapes) == [(2, 3), (8, 1)]
    assert shapes.count == 4 and shapes.resources == frozenset({GPU})
    assert shapes.largest() == {GPU: 8}


def test_pack_a_gang_first_fit_largest_pods_first() -> None:
    shapes = shapes_of(GPU_GRADES, [0, 0, 2, 1, 1])       # free 2, 2, 4, 8
    left = pack(shapes, [({GPU: 1}, 2), ({GPU: 8}, 1)])    # the 8 first, then 1+1 on the first node with room
    assert left is not None
    assert gpus(left) == [(0, 2), (2, 1), (4, 1)]             # emptied nodes stay (with nothing free)
    assert pack(shapes, [({GPU: 8}, 2)]) is None
    assert pack(shapes, [({GPU: 3}, 3)]) is not None        # one on the 4, two on the 8
    assert pack(shapes, [({GPU: 3}, 4)]) is None
    assert pack(shapes, [({CPU: 1000}, 1000)]) == shapes   # nothing graded: no per-node limit


def test_reserve_takes_the_largest_nodes_first_and_never_fails() -> None:
    shapes = shapes_of(GPU_GRADES, [0, 0, 2, 1, 1])       # 2, 2, 4, 8
    assert gpus(reserve(shapes, [({GPU: 4}, 1)])) == [(2, 2), (4, 2)]
    # a pod larger than any virtual node (lower edges underestimate): the largest node is taken whole
    assert gpus(reserve(shapes, [({GPU: 16}, 1)])) == [(2, 2), (4, 1)]


counts_st = st.lists(st.integers(0, 4), min_size=5, max_size=5)
demand_st = st.lists(st.tuples(st.integers(1, 9), st.integers(1, 6)), max_size=4)


@settings(max_examples=300, deadline=None)
@given(counts_st, demand_st)
def test_pack_is_a_real_first_fit_on_the_expanded_nodes(counts: list[int], demands: list[tuple[int, int]]) -> None:
    """Whatever pack answers is realisable: replaying its result node by node, no node goes negative,
    and the GPUs taken equal what was asked; a shape that alone exceeds max_replicas never packs."""
    shapes = shapes_of(GPU_GRADES, counts)
    asked = [({GPU: size}, n) for size, n in demands]
    left = pack(shapes, asked)
    total_before = sum(dict(vec).get(GPU, 0) * n for vec, n in shapes.nodes)
    if left is not None:
        total_after = sum(dict(vec).get(GPU, 0) * n for vec, n in left.nodes)
        assert total_before - total_after == sum(size * n for size, n in demands)
        assert left.count == shapes.count                # emptied nodes stay nodes
        assert all(amount >= 0 for vec, _ in left.nodes for _, amount in vec)
    for size, n in demands:
        if max_replicas(shapes, {GPU: size}) < n:
            assert left is None                     # one shape alone already does not fit


@settings(max_examples=300, deadline=None)
@given(counts_st, st.integers(1, 9))
def test_max_replicas_equals_pack_boundary(counts: list[int], size: int) -> None:
    shapes = shapes_of(GPU_GRADES, counts)
    most = max_replicas(shapes, {GPU: size})
    assert pack(shapes, [({GPU: size}, most)]) is not None
    assert pack(shapes, [({GPU: size}, most + 1)]) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8)), max_size=12))
def test_grades_are_a_lower_bound_of_real_free(nodes: list[tuple[int, int]]) -> None:
    """Virtual nodes never hold more than the real nodes: per pod size, model replicas <= exact count."""
    real = [({GPU: 8}, [{GPU: used}] if used else []) for used, _ in nodes]
    shapes = shapes_of(GPU_GRADES, allocatable_modelings(GPU_GRADES, real))
    for size in range(1, 9):
        exact = sum((8 - used) // size for used, _ in nodes)
        assert max_replicas(shapes, {GPU: size}) <= exact


MIXED_GRADES = [{GPU: g, CPU: 4000 * g, MEMORY: 16 * g * GI} for g in range(9)]
mixed_pod_st = st.fixed_dictionaries({CPU: st.sampled_from((0, 500, 1000, 3000, 8000)),
                                      MEMORY: st.sampled_from((0, GI, 4 * GI, 20 * GI)),
                                      GPU: st.sampled_from((0, 1, 2, 3, 8))})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=9, max_size=9),
       st.lists(st.tuples(mixed_pod_st, st.integers(1, 5)), max_size=4), mixed_pod_st,
       st.sampled_from((UNBOUNDED, 0, 1, 3)))
def test_max_replicas_is_the_sum_over_expanded_nodes(counts: list[int], booked: list, pod: dict[str, int],
                                                     cap: int) -> None:
    """max_replicas (the per-bucket loop over each view's dict form, ``NodeShapes.counted``) counts what the
    straightforward walk over every single node counts: per node the fewest of free // request over the
    requested graded resources, at most ``cap``; several resources, views split by bookings."""
    shapes = reserve(shapes_of(MIXED_GRADES, counts), booked)
    request = {k: v for k, v in pod.items() if v}
    expected = UNBOUNDED if not request else sum(
        min([cap] + [dict(vec).get(name, 0) // amount for name, amount in request.items()])
        for vec, n in shapes.nodes for _ in range(n))
    assert max_replicas(shapes, pod, cap) == expected
    assert max_replicas(shapes, tuple(sorted(request.items())), cap) == expected     # the canonical form too


def reserve_reference(shapes: NodeShapes, demands: list) -> NodeShapes:
    """``reserve`` as first written: canonical buckets again after every pod shape, the last one included."""
    from engine.core.nodefit import _fill, _order
    buckets = list(shapes.nodes)
    for request, count in _order(demands, shapes.resources):
        buckets, left = _fill(buckets, request, count, range(len(buckets) - 1, -1, -1))
        buckets = list(NodeShapes.of(buckets, shapes.resources, shapes.karmada_defaults).nodes)
        while left and buckets:
            vec, n = buckets.pop()
            gone = min(n, left)
            left -= gone
            if n > gone:
                buckets.append((vec, n - gone))
    return NodeShapes.of(buckets, shapes.resources, shapes.karmada_defaults)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=9, max_size=9),
       st.lists(st.lists(st.tuples(mixed_pod_st, st.integers(1, 12)), max_size=3), max_size=3))
def test_reserve_skips_only_a_redundant_canonical_step(counts: list[int], bookings: list) -> None:
    """reserve leaves out the canonical step after its last pod shape when every pod found a node (the
    result is made canonical anyway): the same views as the reference after any sequence of bookings,
    pods that fit no node (whole nodes taken) included."""
    shapes = expected = shapes_of(MIXED_GRADES, counts)
    for booked in bookings:
        shapes, expected = reserve(shapes, booked), reserve_reference(expected, booked)
        assert shapes == expected

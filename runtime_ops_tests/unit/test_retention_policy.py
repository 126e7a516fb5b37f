from runtime_ops.policies.retention import RetentionPolicy, plan_retention


def test_protected_versions_are_kept_and_only_the_oldest_rest_goes() -> None:
    plan = plan_retention(
        range(1, 9),
        production=6,
        production_history=[1, 3, 5, 6],
        candidate=8,
        pending=[7],
        policy=RetentionPolicy(keep_recent=1, keep_previous=1),
    )
    assert plan.reasons == {6: "production", 5: "rollback target", 8: "candidate", 7: "awaiting approval", 4: "recent"}
    assert plan.collect == (1, 2, 3)


def test_a_rollback_keeps_the_model_it_left_as_the_next_rollback_target() -> None:
    # 1 -> 2 -> 3, then rolled back to 2: production 2, and 3 (what it came from) is the way forward again.
    plan = plan_retention([1, 2, 3], production=2, production_history=[1, 2, 3, 2], candidate=None,
                          policy=RetentionPolicy(keep_recent=0, keep_previous=1))  # fmt: skip
    assert plan.reasons == {2: "production", 3: "rollback target"} and plan.collect == (1,)


def test_nothing_is_collected_without_a_production_model_beyond_the_recent_ones() -> None:
    plan = plan_retention([1, 2, 3], production=None, production_history=[], candidate=3,
                          policy=RetentionPolicy(keep_recent=1, keep_previous=1))  # fmt: skip
    assert plan.reasons == {3: "candidate", 2: "recent"} and plan.collect == (1,)
    assert plan_retention([], production=None, production_history=[], candidate=None).collect == ()

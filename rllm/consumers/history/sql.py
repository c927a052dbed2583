"""The SQL text of the named analytics queries (``queries.py`` gives them names and
parameters). ``__DB__`` stands for the history database; ``{name:Type}`` placeholders are
bound by the engine. One dialect that chDB and a ClickHouse server both accept.
"""

from __future__ import annotations

__all__ = [
    "FAILURES",
    "LATENCY_BY_MODEL",
    "LATENCY_BY_TIME",
    "PASSK",
    "PASSK_BY_RUN",
    "REWARDS_BY_TIME",
    "REWARDS_BY_VERSION",
    "RUNS",
    "STALENESS",
    "TOKENS",
]

_FILTERS = """
    ({run:String} = '' OR run_id = {run:String})
    AND ({benchmark:String} = '' OR benchmark = {benchmark:String})
    AND ({model:String} = '' OR model = {model:String})"""

# one row per session: what it ran on (duplicates of an event do not matter to any())
_OPENED = """
    SELECT session_id, any(run_id) AS run_id, any(task_id) AS task_id,
           any(benchmark) AS benchmark, any(model) AS model, any(agent) AS agent,
           any(policy_version) AS policy_version, min(emitted_at) AS opened_at
    FROM __DB__.sessions WHERE kind = 'opened' GROUP BY session_id"""

# one reward per session: the latest (RewardAssigned or scored trajectory); has_reward
# tells a rewarded session from a LEFT JOIN's default row (readonly=1 keeps join_use_nulls off)
_REWARDS = """
    SELECT session_id, 1 AS has_reward, argMax(reward, emitted_at) AS reward,
           argMax(is_correct, emitted_at) AS is_correct, max(emitted_at) AS rewarded_at
    FROM __DB__.rewards GROUP BY session_id"""

_SCORED = f"""
    WITH so AS ({_OPENED}), sr AS ({_REWARDS})
    SELECT * FROM sr INNER JOIN so USING session_id WHERE {_FILTERS}"""

_BUCKET = "toDateTime64(toStartOfInterval({col}, toIntervalSecond({{bucket_s:UInt32}})), 0, 'UTC')"

RUNS = f"""
WITH so AS ({_OPENED}), sr AS ({_REWARDS}),
r AS (
    SELECT run_id, min(seen_at) AS first_seen, max(seen_at) AS last_seen,
           arrayStringConcat(arraySort(groupUniqArrayIf(kind, kind != '')), ',') AS kinds
    FROM __DB__.runs GROUP BY run_id),
s AS (
    SELECT run_id, count() AS sessions,
           arrayStringConcat(arraySort(groupUniqArrayIf(model, model != '')), ',') AS models,
           arrayStringConcat(arraySort(groupUniqArrayIf(benchmark, benchmark != '')), ',')
               AS benchmarks,
           avgIfOrNull(sr.reward, sr.has_reward = 1) AS mean_reward,
           avgOrNull(sr.is_correct) AS accuracy
    FROM so LEFT JOIN sr USING session_id WHERE {_FILTERS} GROUP BY run_id),
st AS (
    SELECT run_id, count() AS steps, sum(prompt_tokens + completion_tokens) AS tokens
    FROM __DB__.steps FINAL GROUP BY run_id)
SELECT r.run_id AS run_id, kinds, first_seen, last_seen, s.sessions AS sessions,
       st.steps AS steps, st.tokens AS tokens, s.models AS models, s.benchmarks AS benchmarks,
       round(s.mean_reward, 4) AS mean_reward, round(s.accuracy, 4) AS accuracy
FROM r INNER JOIN s ON s.run_id = r.run_id LEFT JOIN st ON st.run_id = r.run_id
ORDER BY first_seen DESC LIMIT {{limit:UInt32}}"""

# per run: version 3 of one training run has nothing to do with version 3 of another
REWARDS_BY_VERSION = f"""
SELECT run_id, policy_version, count() AS sessions, round(avg(reward), 4) AS mean_reward,
       round(avgOrNull(is_correct), 4) AS accuracy
FROM ({_SCORED})
GROUP BY run_id, policy_version ORDER BY run_id, policy_version LIMIT {{limit:UInt32}}"""

REWARDS_BY_TIME = f"""
SELECT run_id, {_BUCKET.format(col="rewarded_at")} AS bucket, count() AS sessions,
       round(avg(reward), 4) AS mean_reward, round(avgOrNull(is_correct), 4) AS accuracy
FROM ({_SCORED})
GROUP BY run_id, bucket ORDER BY run_id, bucket LIMIT {{limit:UInt32}}"""


# unbiased pass@k per task (Chen et al. 2021): 1 - C(n-c, k) / C(n, k), as a product
def _passk(keys: str) -> str:
    return f"""
SELECT {keys}, count() AS tasks, sum(n) AS samples, {{k:UInt32}} AS k,
       round(avg(multiIf(
           c = 0, 0.0,
           n - c < {{k:UInt32}}, 1.0,
           1.0 - arrayProduct(arrayMap(i -> 1.0 - {{k:UInt32}} / i,
                                       range(toUInt32(n - c + 1), toUInt32(n + 1)))))), 4)
           AS pass_at_k,
       round(avg(c / n), 4) AS pass_at_1
FROM (
    SELECT {keys}, task_id, count() AS n, countIf(is_correct = 1) AS c
    FROM ({_SCORED}) GROUP BY {keys}, task_id)
WHERE n >= {{k:UInt32}}
GROUP BY {keys} ORDER BY {keys} LIMIT {{limit:UInt32}}"""


PASSK = _passk("benchmark, model")
PASSK_BY_RUN = _passk("run_id, benchmark, model")

TOKENS = f"""
WITH so AS ({_OPENED})
SELECT st.model AS model, so.agent AS agent, count() AS steps,
       sum(st.prompt_tokens) AS prompt_tokens, sum(st.completion_tokens) AS completion_tokens,
       sum(st.cached_tokens) AS cached_tokens, sum(st.n_response_ids) AS captured_ids,
       countIf(st.token_status = 'missing') AS steps_missing_tokens
FROM (
    SELECT session_id, run_id, model, prompt_tokens, completion_tokens, cached_tokens,
           n_response_ids, token_status
    FROM __DB__.steps FINAL) AS st
LEFT JOIN so ON so.session_id = st.session_id
WHERE ({{run:String}} = '' OR st.run_id = {{run:String}})
  AND ({{benchmark:String}} = '' OR so.benchmark = {{benchmark:String}})
  AND ({{model:String}} = '' OR st.model = {{model:String}})
GROUP BY model, agent ORDER BY steps DESC LIMIT {{limit:UInt32}}"""

_LATENCY = """
SELECT {key}, count() AS steps,
       arrayMap(x -> round(x, 2), quantiles(0.5, 0.95, 0.99)(latency_ms)) AS upstream_ms,
       arrayMap(x -> round(x, 2), quantiles(0.5, 0.95, 0.99)(overhead_ms)) AS added_ms,
       round(quantileOrNull(0.5)(ttft_ms), 2) AS ttft_p50_ms
FROM __DB__.steps FINAL
WHERE ({{run:String}} = '' OR run_id = {{run:String}})
  AND ({{model:String}} = '' OR model = {{model:String}}) AND error_kind = ''
GROUP BY {group} ORDER BY {group} LIMIT {{limit:UInt32}}"""

LATENCY_BY_MODEL = _LATENCY.format(key="model, api", group="model, api")
LATENCY_BY_TIME = _LATENCY.format(
    key=_BUCKET.format(col="started_at") + " AS bucket", group="bucket"
)

# lag = the policy version current when the episode was ready to train (the latest update
# created at or before it was assembled) minus the version that sampled the step
STALENESS = """
WITH ep AS (
    SELECT e.run_id AS run_id, arrayJoin(e.session_ids) AS session_id,
           pu.version AS current_version
    FROM (SELECT * FROM __DB__.episodes FINAL) AS e
    ASOF LEFT JOIN (SELECT run_id, version, created_at FROM __DB__.policy_updates FINAL) AS pu
        ON e.run_id = pu.run_id AND e.assembled_at >= pu.created_at)
SELECT ep.current_version - st.policy_version AS lag, count() AS steps,
       sum(st.completion_tokens) AS tokens,
       round(100 * sum(st.completion_tokens)
             / nullIf(sum(sum(st.completion_tokens)) OVER (), 0), 2) AS pct_tokens
FROM ep INNER JOIN (
    SELECT session_id, policy_version, completion_tokens, model FROM __DB__.steps FINAL) AS st
    ON st.session_id = ep.session_id
WHERE ({run:String} = '' OR ep.run_id = {run:String})
  AND ({model:String} = '' OR st.model = {model:String})
GROUP BY lag ORDER BY lag LIMIT {limit:UInt32}"""

FAILURES = """
SELECT source, kind, detail, count() AS count, max(at) AS last_at
FROM (
    SELECT 'step' AS source, error_kind AS kind,
           concat(model, ' ', toString(error_status)) AS detail, emitted_at AS at, run_id
    FROM __DB__.steps FINAL WHERE error_kind != ''
    UNION ALL
    SELECT 'session', status, error, emitted_at, run_id
    FROM __DB__.sessions FINAL WHERE kind = 'closed' AND status != 'ok'
    UNION ALL
    SELECT 'dead_letter', error_type, source_topic, failed_at, ''
    FROM __DB__.dead_letters FINAL)
WHERE {run:String} = '' OR run_id = {run:String}
GROUP BY source, kind, detail ORDER BY count DESC LIMIT {limit:UInt32}"""

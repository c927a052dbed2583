"""The SQL of the viewer's own reads (the numbers analytics also shows come from the named
queries of ``rllm.consumers.history``). ``__DB__`` stands for the history database;
``{name:Type}`` placeholders are bound by the engine; every statement runs through the
store's ``query_user``, under ``readonly=1`` and the read limits set by the session.

A ``LEFT JOIN`` fills a missing row with its columns' defaults (``readonly=1`` forbids
``join_use_nulls``), so each joined side carries a ``has_*`` column that says it was there.
"""

from __future__ import annotations

__all__ = [
    "COMPARE",
    "EPISODE_OF",
    "POLICY_UPDATES",
    "REWARDS_OF",
    "RUN_SESSIONS",
    "RUN_STATES",
    "SESSION_EVENTS",
    "STEPS_OF",
]

# per run: sessions opened and closed, the newest event, the trainer's backends and versions
RUN_STATES = """
WITH se AS (
    SELECT run_id, uniqExactIf(session_id, kind = 'opened') AS opened,
           uniqExactIf(session_id, kind = 'closed') AS closed, max(emitted_at) AS last_session
    FROM __DB__.sessions
    WHERE {run:String} = '' OR run_id = {run:String} GROUP BY run_id),
st AS (
    SELECT run_id, 1 AS has_steps, max(emitted_at) AS last_step FROM __DB__.steps
    WHERE {run:String} = '' OR run_id = {run:String} GROUP BY run_id),
pu AS (
    SELECT run_id, count() AS updates, max(version) AS latest_version,
           arrayStringConcat(arraySort(groupUniqArrayIf(backend, backend != '')), ',')
               AS backends
    FROM __DB__.policy_updates FINAL
    WHERE {run:String} = '' OR run_id = {run:String} GROUP BY run_id)
SELECT se.run_id AS run_id, opened, closed,
       if(st.has_steps = 1, greatest(last_session, st.last_step), last_session) AS last_event,
       pu.updates AS updates, pu.latest_version AS latest_version, pu.backends AS backends
FROM se LEFT JOIN st ON st.run_id = se.run_id LEFT JOIN pu ON pu.run_id = se.run_id
ORDER BY run_id"""

# one row per session of a run: what it ran on, how it ended, its reward
RUN_SESSIONS = """
WITH so AS (
    SELECT session_id, any(task_id) AS task_id, any(rollout_index) AS rollout_index,
           any(policy_version) AS policy_version, any(agent) AS agent,
           min(emitted_at) AS opened_at
    FROM __DB__.sessions WHERE run_id = {run:String} AND kind = 'opened' GROUP BY session_id),
sc AS (
    SELECT session_id, 1 AS has_close, argMax(status, emitted_at) AS status
    FROM __DB__.sessions WHERE run_id = {run:String} AND kind = 'closed' GROUP BY session_id),
sr AS (
    SELECT session_id, 1 AS has_reward, argMax(reward, emitted_at) AS reward,
           argMax(is_correct, emitted_at) AS is_correct
    FROM __DB__.rewards WHERE run_id = {run:String} GROUP BY session_id),
st AS (
    SELECT session_id, count() AS steps, sum(completion_tokens) AS completion_tokens,
           countIf(error_kind != '') AS failed_steps
    FROM __DB__.steps FINAL WHERE run_id = {run:String} GROUP BY session_id)
SELECT so.session_id AS session_id, task_id, rollout_index, policy_version, agent, opened_at,
       sc.has_close AS has_close, sc.status AS status, st.steps AS steps,
       st.completion_tokens AS completion_tokens, st.failed_steps AS failed_steps,
       sr.has_reward AS has_reward, sr.reward AS reward, sr.is_correct AS is_correct
FROM so LEFT JOIN sc ON sc.session_id = so.session_id
LEFT JOIN sr ON sr.session_id = so.session_id LEFT JOIN st ON st.session_id = so.session_id
ORDER BY task_id, rollout_index, opened_at, session_id LIMIT {limit:UInt32}"""

POLICY_UPDATES = """
SELECT version, created_at, backend, base_model, num_episodes, num_tokens, checkpoint_uri,
       mapKeys(metrics) AS metric_names, mapValues(metrics) AS metric_values
FROM __DB__.policy_updates FINAL WHERE run_id = {run:String} ORDER BY version"""

# a session's lifecycle rows (opened, closed), oldest first
SESSION_EVENTS = """
SELECT kind, run_id, task_id, benchmark, agent, model, trajectory_name, rollout_index,
       group_size, policy_version, status, num_steps, error, output_json, task_json,
       metadata_json, emitted_at
FROM __DB__.sessions FINAL WHERE session_id = {session:String} ORDER BY emitted_at, kind"""

STEPS_OF = """
SELECT step_id, step_index, parent_step_id, api, model, upstream, policy_version, started_at,
       latency_ms, ttft_ms, overhead_ms, prompt_tokens, completion_tokens, cached_tokens,
       n_prompt_ids, prompt_prefix_len, token_status, finish_reason, error_kind,
       error_message, error_status, request_json, response_json, sampling_params_json,
       response_token_ids, response_logprobs
FROM __DB__.steps FINAL WHERE session_id = {session:String} ORDER BY step_index, step_id"""

REWARDS_OF = """
SELECT source, reward, is_correct, mapKeys(signals) AS signal_names,
       mapValues(signals) AS signal_values, evaluator, metadata_json, emitted_at
FROM __DB__.rewards FINAL WHERE session_id = {session:String} ORDER BY emitted_at"""

# the group a session was trained in, with its advantage
EPISODE_OF = """
SELECT run_id, task_id, estimator, group_size, is_partial, uniform_reward, assembled_at,
       length(session_ids) AS members, indexOf(session_ids, {session:String}) AS position,
       if(position <= length(advantages), advantages[position], nan) AS advantage,
       if(position <= length(rewards), rewards[position], nan) AS group_reward,
       advantages
FROM __DB__.episodes FINAL WHERE has(session_ids, {session:String})
ORDER BY assembled_at DESC LIMIT 1"""

# per task: the rewarded sessions of side a and side b (a run, and a policy version or -1)
COMPARE = """
WITH so AS (
    SELECT session_id, any(s.run_id) AS run_id, any(s.task_id) AS task_id,
           any(s.policy_version) AS policy_version
    FROM __DB__.sessions AS s
    WHERE s.kind = 'opened' AND s.run_id IN ({a_run:String}, {b_run:String})
    GROUP BY session_id),
sr AS (
    SELECT session_id, argMax(reward, emitted_at) AS reward,
           argMax(is_correct, emitted_at) AS is_correct
    FROM __DB__.rewards AS r WHERE r.run_id IN ({a_run:String}, {b_run:String})
    GROUP BY session_id),
scored AS (
    SELECT task_id, reward, is_correct,
           run_id = {a_run:String}
               AND ({a_version:Int64} < 0 OR policy_version = {a_version:Int64}) AS in_a,
           run_id = {b_run:String}
               AND ({b_version:Int64} < 0 OR policy_version = {b_version:Int64}) AS in_b
    FROM sr INNER JOIN so ON so.session_id = sr.session_id)
SELECT task_id, countIf(in_a) AS a_sessions, avgIf(reward, in_a) AS a_reward,
       avgIf(is_correct, in_a) AS a_accuracy, countIf(in_b) AS b_sessions,
       avgIf(reward, in_b) AS b_reward, avgIf(is_correct, in_b) AS b_accuracy
FROM scored WHERE in_a OR in_b GROUP BY task_id ORDER BY task_id LIMIT {limit:UInt32}"""

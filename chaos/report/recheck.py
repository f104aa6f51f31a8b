"""Re-checking the core invariants with Spark SQL over the whole archive.

The per-run checkers (``checks.json``) are the authority; this is an
independent second implementation over the ``events`` table, so a checker bug
(or a stale ``checks.json``) shows up as a *disagreement* in the report.

- ``ownership-generation`` (invariant 1 of docs/architecture.md, eager protocol): within one run,
  group and generation, no partition appears in the ``assigned`` events of two
  members (sources), unless the first member stopped or restarted in between,
  or was replaced by a member started with its ``group.instance.id``, or the
  later claim is by a member with the same ``group.instance.id`` (KIP-345
  replacement within a generation), as the checker drops such claims. Compared with the checker's
  "owned by both" findings. Runs with a cooperative (KIP-429) member are not
  compared: there the checker also judges un-revoked holdings across
  generations, which this rule does not model.
- ``ownership-time`` (invariant 2, as ``chaos/checkers/ownership_time.py``): over the ``ownership_intervals``
  table (the checker's holding model), a zombie window opens when a member acquires a partition another member
  of the group still holds and closes when either releases it. It is a violation unless the zombie's eviction
  is shown inside it (plus clock slack where the checker allows it): a ``member_failed`` line for the member id
  the zombie last reported, a non-``Unknown`` sample of the group without that id, the zombie's own
  max.poll.interval error, or another member started with (or assigned under) the zombie's
  ``group.instance.id``. An acquisition of an older generation than the holder's latest assignment is a stale
  assignment: the acquirer is the zombie, and its ``member_failed`` line counts from any time before the window
  closed. An explained window is still a violation when the zombie processed the partition in it
  and then got an ``ok`` commit of it there. Compared as the set of (group, partition, zombie, newer owner) the
  checker names (a list cut at ``max_findings``: the checker's must be among Spark's). Not re-checked:
  processing a partition without holding it. Runs with a member whose client may stamp ownership after the fact
  (``ts_uncertain_ns``) are not compared.
- ``delivery`` (§5.4, at-least-once part): every ``send_ok`` (topic, partition,
  offset) appears in some ``consumed`` event (any member, any group) or in a
  ``final_read``. Compared exactly with the checker's ``lost`` metric.
- ``generations`` (§5.6, per-member part, as ``chaos/checkers/generations.py``):
  per member incarnation (``member_start``/``member_stop`` start a new one),
  over ``assigned``/``revoked``/``lost``/``consumed`` and ``ok`` commits with a
  generation >= 0 in history order (an ``app`` member's ``consumed`` left out, as the checker leaves it out:
  its generation is the one the record was handed over in, recorded when the application is done with it,
  ``runs.app_members``), no generation below an earlier one, and
  every eager ``assigned`` of a generation carries the partitions of the first
  one (the coordinator may hand the current generation out again, unchanged, to
  a rejoining follower). Compared with the checker's per-member findings (those
  not about the group).
- ``delivery-commits`` (invariant 4 of docs/architecture.md, "Invariants", the commit half, as
  ``chaos/checkers/delivery.py``): an ``ok`` commit of next offset N for a partition by a member of group G
  needs every ``send_ok`` offset below N (acknowledged anywhere in the history) processed by G: for a manual
  commit by a ``consumed`` event before it; for an auto commit (which commits the position, possibly a batch
  still in processing) by the end of the committing member's next ``consumed`` batch of that partition after
  it, or by the end of the history if none comes. One finding per commit and partition; compared with the
  checker's "had not been processed by the group" findings by count (a list the checker cut at
  ``max_findings``: Spark must find at least as many; cut before any commit finding: not compared). Runs with a
  ``command`` (black-box) member are not compared: their commits are not recorded, and the checker judges the
  coordinator's committed offsets against the members' processed-record reports instead.
- ``committed-offsets`` (invariant 5, as ``chaos/checkers/committed_offsets.py``): per group and partition, in
  history order, ``ok`` commits and the observer's ``committed_offsets`` samples (offsets >= 0), the
  comparison restarting at each ``fault_start`` that records the trait ``rewinds_committed_offsets`` (none in a
  history recorded before traits were, as the checker reads it): a sample below an earlier sample,
  a commit below an earlier commit, or any observation below a maximum that rose (at the latest answer time of
  the rises so far) more than the clock slack before the observation was sent, is a move back. Samples a
  deposed coordinator answered (another broker logged loading the group at least the log's stamp resolution
  before) are dropped, as the checker sets them aside. Compared as the set of (group, topic, partition) the
  checker names. The checker also sets aside a new coordinator's trailing reads and reads behind the store
  (``stored_offsets``); those rules are not mirrored:
  a partition whose moves are all samples of a group some broker loaded, and that the checker does not name,
  makes the row not compared. Runs with a member whose client may stamp commits after the fact (the Java
  worker, the JVM interceptor: ``ts_uncertain_ns``, which the events table does not carry) are not compared.
- ``fencing`` (invariant 3, classic groups, as ``chaos/checkers/fencing.py``): the coordinator's generation
  timeline per group (``stabilized``/``preparing_rebalance``/``loading`` lines of the broker that last loaded the
  group — every broker's before any loading line — and ``group_state`` samples that are neither Dead nor Unknown,
  latest evidence wins, repeats collapsed); an ``ok`` commit with generation
  g >= 0 is a violation when every entry in effect at some moment of [sent, answered] (without an answer stamp:
  [reported - slack, reported]), widened by the log's stamp resolution, is above g. Compared as whether the run
  has a violation. Not compared: KIP-848 groups (member epochs against each member's own timeline, not
  re-checked; the events table has no ``group_type``, so a run with a KIP-848 coordinator line or a committing
  group without classic rebalance lines counts as one) and the runs with stamp intervals, as above.

The clock slack and ``max_findings`` are each run's checks.json ``bounds`` (``recheck(..., bounds=...)``), else the
checkers' defaults.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

INVARIANTS = ("ownership-generation", "ownership-time", "delivery", "delivery-commits", "generations",
              "committed-offsets", "fencing")
#: the per-run checker each re-checked invariant is compared with (the invariant's own name when absent)
CHECKER_OF = {"delivery-commits": "delivery"}
#: checks.json "bounds" when a run's checks.json has none (chaos.checkers.bounds.CheckerBounds' defaults)
DEFAULT_SLACK_S = 0.5
DEFAULT_MAX_FINDINGS = 50
#: clients whose members' events carry an exact stamp (no ``ts_uncertain_ns``, which the events table lacks):
#: the Java worker and the JVM interceptor stamp some events after the fact (docs/architecture.md, "The history")
EXACT_STAMP_CLIENTS = ("confluent-kafka", "kafka-python")
#: chaos.checkers.coordinator.LOG_STAMP_UNCERTAINTY_NS (a coordinator log line's stamp resolution), restated
LOG_STAMP_UNCERTAINTY_NS = 2_000_000

_SQL_OWNERSHIP = """
WITH claims AS (
  SELECT run, group_id, generation, source, seq, p.topic AS topic, p.partition AS partition
  FROM (SELECT run, group_id, generation, source, seq, explode(partitions) AS p
        FROM events WHERE kind = 'assigned' AND generation IS NOT NULL)),
starts AS (
  SELECT run, source, seq, instance_id FROM events WHERE kind = 'member_start'),
ends AS (  -- a member's claims end when it stops or starts again
  SELECT run, source, seq FROM events WHERE kind IN ('member_start', 'member_stop')),
claim_instance AS (  -- group.instance.id of the claiming member at the time of the claim
  SELECT c.run, c.source, c.seq, max_by(s.instance_id, s.seq) AS instance_id
  FROM (SELECT DISTINCT run, source, seq FROM claims) c
  JOIN starts s ON s.run = c.run AND s.source = c.source AND s.seq < c.seq
  GROUP BY c.run, c.source, c.seq),
pairs AS (
  SELECT a.run, a.group_id, a.generation, a.topic, a.partition, a.source AS a_source, a.seq AS a_seq,
         b.source AS b_source, b.seq AS b_seq, ci.instance_id AS a_instance, cb.instance_id AS b_instance
  FROM claims a JOIN claims b
    ON a.run = b.run AND a.group_id = b.group_id AND a.generation = b.generation AND a.topic = b.topic
   AND a.partition = b.partition AND a.source <> b.source AND a.seq < b.seq
  LEFT JOIN claim_instance ci ON ci.run = a.run AND ci.source = a.source AND ci.seq = a.seq
  LEFT JOIN claim_instance cb ON cb.run = b.run AND cb.source = b.source AND cb.seq = b.seq),
live_pairs AS (
  SELECT * FROM pairs p
  WHERE NOT EXISTS (SELECT 1 FROM ends e WHERE e.run = p.run AND e.source = p.a_source
                    AND e.seq > p.a_seq AND e.seq < p.b_seq)
    -- KIP-345: a member started with the claimer's group.instance.id replaces it
    AND NOT EXISTS (SELECT 1 FROM starts s WHERE s.run = p.run AND p.a_instance IS NOT NULL
                    AND s.instance_id = p.a_instance AND s.source <> p.a_source
                    AND s.seq > p.a_seq AND s.seq < p.b_seq)
    -- KIP-345 within a generation: the member assigned last holds its instance's partitions
    AND NOT (p.a_instance IS NOT NULL AND p.a_instance = p.b_instance))
SELECT run, group_id, generation, topic, partition, count(*) AS members, min(a_seq) AS first_seq,
       max(b_seq) AS last_seq, concat_ws(',', sort_array(collect_set(a_source) || collect_set(b_source))) AS sources
FROM live_pairs GROUP BY run, group_id, generation, topic, partition
"""

_SQL_LOST = """
WITH produced AS (
  SELECT DISTINCT run, topic, partition, record_offset AS o FROM events WHERE kind = 'send_ok'),
seen AS (
  SELECT run, topic, partition, explode(consumed_offsets) AS o FROM events WHERE kind = 'consumed'
  UNION ALL
  SELECT run, topic, r.partition AS partition, r.offset AS o
  FROM (SELECT run, topic, explode(final_records) AS r FROM events WHERE kind = 'final_read'))
SELECT p.run, p.topic, p.partition, p.o AS record_offset
FROM produced p LEFT ANTI JOIN seen s
  ON p.run = s.run AND p.topic = s.topic AND p.partition = s.partition AND p.o = s.o
"""

_SQL_COMMIT_AHEAD = """
WITH produced AS (
  SELECT run, topic, partition, record_offset AS o, min(seq) AS send_seq
  FROM events WHERE kind = 'send_ok' GROUP BY run, topic, partition, record_offset),
processed AS (  -- when each group first processed each offset
  SELECT run, group_id, topic, partition, o, min(seq) AS first_seq
  FROM (SELECT run, group_id, topic, partition, seq, explode(consumed_offsets) AS o
        FROM events WHERE kind = 'consumed')
  GROUP BY run, group_id, topic, partition, o),
commits AS (
  SELECT run, group_id, source, seq, auto, c.topic AS topic, c.partition AS partition, c.offset AS n
  FROM (SELECT run, group_id, source, seq, coalesce(auto, false) AS auto, explode(commit_offsets) AS c
        FROM events WHERE kind = 'commit' AND outcome = 'ok')),
next_batch AS (  -- an auto commit may cover the batch its member processes next for that partition
  SELECT c.run, c.seq, c.topic, c.partition, min(b.seq) AS next_seq
  FROM commits c JOIN events b
    ON b.kind = 'consumed' AND b.run = c.run AND b.source = c.source AND b.group_id = c.group_id
   AND b.topic = c.topic AND b.partition = c.partition AND b.seq > c.seq
  WHERE c.auto GROUP BY c.run, c.seq, c.topic, c.partition),
judged AS (  -- processed by the group up to `upto` (inclusive) counts
  SELECT c.*, CASE WHEN c.auto THEN coalesce(nb.next_seq, 9223372036854775807) ELSE c.seq - 1 END AS upto
  FROM commits c LEFT JOIN next_batch nb
    ON c.auto AND nb.run = c.run AND nb.seq = c.seq AND nb.topic = c.topic AND nb.partition = c.partition)
SELECT j.run, j.group_id, j.source, j.seq, j.auto, j.topic, j.partition, j.n,
       min(p.o) AS gap, min_by(p.send_seq, p.o) AS gap_send_seq
FROM judged j
JOIN produced p ON p.run = j.run AND p.topic = j.topic AND p.partition = j.partition AND p.o < j.n
LEFT JOIN processed q
  ON q.run = j.run AND q.group_id = j.group_id AND q.topic = j.topic AND q.partition = j.partition
 AND q.o = p.o AND q.first_seq <= j.upto
WHERE q.o IS NULL
GROUP BY j.run, j.group_id, j.source, j.seq, j.auto, j.topic, j.partition, j.n
"""

# Per (run, group, topic, partition, rewind epoch), in history order: accepted commits and judged samples.
# A sample answered by a broker other than the last one logged loading its group (before the sample, beyond
# the log's stamp resolution) is a deposed coordinator's cache: dropped, as the checker sets it aside.
_SQL_OFFSETS_BACK = """
WITH loads AS (
  SELECT run, group_id, mono_ns, seq, broker FROM events WHERE kind = 'broker_log' AND log_event = 'loading'),
epochs AS (  -- a fault that rewinds the committed offsets (its recorded trait) restarts the comparison
  SELECT run, seq, sum(CASE WHEN kind = 'fault_start'
                             AND array_contains(coalesce(traits, array()), 'rewinds_committed_offsets')
                            THEN 1 ELSE 0 END)
                     OVER (PARTITION BY run ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS epoch
  FROM events WHERE kind IN ('fault_start', 'commit', 'committed_offsets')),
raw AS (
  SELECT run, group_id, seq, kind, mono_ns AS ns, coordinator,
         -- a commit was applied somewhere between its send and its answer
         CASE WHEN kind = 'commit' THEN greatest(mono_ns, coalesce(answered_ns, mono_ns)) ELSE mono_ns END AS late,
         o.topic AS topic, o.partition AS partition, o.offset AS value
  FROM (SELECT *, explode(commit_offsets) AS o FROM events
        WHERE (kind = 'commit' AND outcome = 'ok') OR kind = 'committed_offsets')),
last_load AS (  -- the broker that last loaded the sample's group before the sample was answered
  SELECT r.run, r.seq, max_by(l.broker, struct(l.mono_ns, l.seq)) AS loader
  FROM (SELECT DISTINCT run, group_id, seq, ns FROM raw WHERE kind = 'committed_offsets') r
  JOIN loads l ON l.run = r.run AND l.group_id = r.group_id AND l.mono_ns <= r.ns - @UNCERTAINTY@
  GROUP BY r.run, r.seq),
obs AS (
  SELECT r.*, e.epoch
  FROM raw r JOIN epochs e ON e.run = r.run AND e.seq = r.seq
  LEFT JOIN last_load ll ON ll.run = r.run AND ll.seq = r.seq
  WHERE r.value >= 0
    AND NOT (r.kind = 'committed_offsets' AND r.coordinator IS NOT NULL AND ll.loader IS NOT NULL
             AND ll.loader <> r.coordinator)),
ordered AS (
  SELECT *,
         max(value) OVER w_before AS prev_max,
         max(CASE WHEN kind = 'commit' THEN value END) OVER w_before AS prev_commit_max,
         max(CASE WHEN kind = 'committed_offsets' THEN value END) OVER w_before AS prev_sample_max
  FROM obs
  WINDOW w_before AS (PARTITION BY run, group_id, topic, partition, epoch ORDER BY seq
                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)),
rises AS (  -- each rise of the maximum, at the latest time any rise so far was observed
  SELECT run, group_id, topic, partition, epoch, seq, value,
         max(late) OVER (PARTITION BY run, group_id, topic, partition, epoch ORDER BY seq
                         ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS rise_ns
  FROM ordered WHERE prev_max IS NULL OR value > prev_max),
below AS (SELECT * FROM ordered WHERE value < prev_max),
moves AS (  -- observations below an earlier maximum: of their own source, or of the other one by more than slack
  SELECT run, group_id, topic, partition, seq, kind FROM below
  WHERE (kind = 'committed_offsets' AND value < prev_sample_max) OR (kind = 'commit' AND value < prev_commit_max)
  UNION
  SELECT b.run, b.group_id, b.topic, b.partition, b.seq, b.kind
  FROM below b JOIN rises r
    ON r.run = b.run AND r.group_id = b.group_id AND r.topic = b.topic AND r.partition = b.partition
   AND r.epoch = b.epoch AND r.seq < b.seq AND r.value > b.value
  JOIN run_bounds rb ON rb.run = b.run
  WHERE r.rise_ns < b.ns - rb.slack_ns),
loaded_groups AS (SELECT DISTINCT run, group_id FROM loads)
SELECT m.run, m.group_id, m.topic, m.partition, min(m.seq) AS first_seq, count(*) AS observations,
       -- only samples in a group someone loaded: the checker may set them all aside as trailing reads
       bool_and(m.kind = 'committed_offsets' AND lg.group_id IS NOT NULL) AS maybe_trailing
FROM moves m LEFT JOIN loaded_groups lg ON lg.run = m.run AND lg.group_id = m.group_id
GROUP BY m.run, m.group_id, m.topic, m.partition
""".replace("@UNCERTAINTY@", str(LOG_STAMP_UNCERTAINTY_NS))

# Classic groups: the coordinator's generation timeline (the latest evidence wins, repeats collapsed) and, per
# accepted commit, the entries in effect at some moment of the interval it can have been judged in.
_SQL_FENCING = """
WITH logs AS (  -- each line with the broker that last loaded the group (the coordinator since), null before any
  SELECT run, group_id, seq, mono_ns, generation, log_event, broker,
         last_value(CASE WHEN log_event = 'loading' THEN broker END, true)
           OVER (PARTITION BY run, group_id ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS loaded_by
  FROM events WHERE kind = 'broker_log'),
tl_raw AS (
  SELECT run, group_id, seq, mono_ns, generation FROM logs
  WHERE log_event IN ('stabilized', 'preparing_rebalance', 'loading') AND generation IS NOT NULL
    AND (loaded_by IS NULL OR loaded_by = broker)  -- a replaced coordinator's lines are not the group's
  UNION ALL
  SELECT run, group_id, seq, mono_ns, generation FROM events
  WHERE kind = 'group_state' AND generation IS NOT NULL AND generation >= 0
    AND coalesce(state, '') NOT IN ('Dead', 'Unknown')),
tl AS (
  SELECT * FROM (SELECT *, lag(generation) OVER (PARTITION BY run, group_id ORDER BY seq) AS prev FROM tl_raw)
  WHERE prev IS NULL OR prev <> generation),
iv AS (  -- sent..answered when both are stamped, else reported - slack..reported; widened by the log's resolution
  SELECT c.run, c.group_id, c.seq, c.source, c.generation AS g,
         CASE WHEN c.answered_ns IS NOT NULL THEN c.mono_ns ELSE c.mono_ns - rb.slack_ns END - @U@ AS start_ns,
         greatest(c.mono_ns, coalesce(c.answered_ns, c.mono_ns)) + @U@ AS end_ns
  FROM events c JOIN run_bounds rb ON rb.run = c.run
  WHERE c.kind = 'commit' AND c.outcome = 'ok' AND c.generation IS NOT NULL AND c.generation >= 0),
at_start AS (  -- the entry in effect when the interval opens
  SELECT i.run, i.seq, max_by(t.generation, t.seq) AS gen, max(t.seq) AS tl_seq
  FROM iv i JOIN tl t ON t.run = i.run AND t.group_id = i.group_id AND t.mono_ns <= i.start_ns
  GROUP BY i.run, i.seq),
inside AS (  -- the entries that took effect inside it
  SELECT i.run, i.seq, min(t.generation) AS gen, max(t.seq) AS tl_seq
  FROM iv i JOIN tl t ON t.run = i.run AND t.group_id = i.group_id AND t.mono_ns > i.start_ns
                     AND t.mono_ns <= i.end_ns
  GROUP BY i.run, i.seq)
SELECT i.run, i.group_id, i.seq, i.source, i.g, least(a.gen, n.gen) AS lowest, greatest(a.tl_seq, n.tl_seq) AS tl_seq
FROM iv i LEFT JOIN at_start a ON a.run = i.run AND a.seq = i.seq LEFT JOIN inside n ON n.run = i.run AND n.seq = i.seq
WHERE coalesce(a.gen, n.gen) IS NOT NULL AND least(a.gen, n.gen) > i.g
""".replace("@U@", str(LOG_STAMP_UNCERTAINTY_NS))

# Zombie windows over the report's ownership_intervals table (chaos/report/tables.py: the checker's holding model),
# and whether the coordinator's or the zombie's own evidence explains each (chaos/checkers/ownership_time.py).
_SQL_OWNERSHIP_TIME = """
WITH iv AS (SELECT run, group_id, topic, partition, member, generation, start_seq, start_ns, end_ns, end_seq
            FROM ownership_intervals),
pairs AS (  -- b acquired the partition while a held it; the window ends when either releases it
  SELECT a.run, a.group_id, a.topic, a.partition, a.member AS a_member, b.member AS b_member, a.start_ns AS a_ns,
         b.start_ns AS b_ns, b.generation AS b_gen, b.start_seq AS w_seq, least(a.end_ns, b.end_ns) AS end_ns,
         CASE WHEN a.end_seq IS NULL THEN b.end_seq WHEN b.end_seq IS NULL THEN a.end_seq
              ELSE least(a.end_seq, b.end_seq) END AS end_seq
  FROM iv a JOIN iv b
    ON a.run = b.run AND a.group_id = b.group_id AND a.topic = b.topic AND a.partition = b.partition
   AND a.member <> b.member AND a.start_seq < b.start_seq AND (a.end_seq IS NULL OR a.end_seq > b.start_seq)),
held AS (  -- the generation of a's latest assignment before the window
  SELECT p.run, p.a_member, p.w_seq, max_by(e.generation, e.seq) AS a_gen
  FROM (SELECT DISTINCT run, a_member, w_seq FROM pairs) p JOIN events e
    ON e.run = p.run AND e.source = p.a_member AND e.kind = 'assigned' AND e.seq < p.w_seq
  GROUP BY p.run, p.a_member, p.w_seq),
w AS (  -- b's assignment of an older generation than a's is a stale one: b is then the zombie
  SELECT run, group_id, topic, partition, CASE WHEN stale THEN b_member ELSE a_member END AS zombie,
         CASE WHEN stale THEN a_member ELSE b_member END AS newer, CASE WHEN stale THEN b_ns ELSE a_ns END AS z_ns,
         w_seq, end_ns, end_seq, stale
  FROM (SELECT p.*, coalesce(p.b_gen < h.a_gen, false) AS stale
        FROM pairs p LEFT JOIN held h ON h.run = p.run AND h.a_member = p.a_member AND h.w_seq = p.w_seq)),
inc AS (  -- the zombie's incarnation at the window's start: its last member_start before it
  SELECT w.run, w.zombie, w.w_seq, max_by(s.instance_id, s.seq) AS instance_id, max_by(s.group_id, s.seq) AS z_group,
         max(s.seq) AS inc_seq
  FROM (SELECT DISTINCT run, zombie, w_seq FROM w) w
  LEFT JOIN events s ON s.run = w.run AND s.source = w.zombie AND s.kind = 'member_start' AND s.seq < w.w_seq
  GROUP BY w.run, w.zombie, w.w_seq),
zid AS (  -- the member id the zombie last reported in that incarnation
  SELECT i.run, i.zombie, i.w_seq, i.instance_id, i.z_group, max_by(e.member_id, e.seq) AS member_id
  FROM inc i LEFT JOIN events e
    ON e.run = i.run AND e.source = i.zombie AND e.kind IN ('assigned', 'revoked', 'lost')
   AND e.member_id IS NOT NULL AND e.seq <= i.w_seq AND e.seq > coalesce(i.inc_seq, 0)
  GROUP BY i.run, i.zombie, i.w_seq, i.instance_id, i.z_group),
starts AS (SELECT run, source, seq, group_id, instance_id FROM events WHERE kind = 'member_start'),
inst_events AS (  -- KIP-345: a member started with, or assigned under, a group.instance.id
  SELECT run, source, mono_ns, group_id, instance_id FROM events
  WHERE kind = 'member_start' AND instance_id IS NOT NULL
  UNION ALL
  SELECT a.run, a.source, a.mono_ns, max_by(s.group_id, s.seq) AS group_id, max_by(s.instance_id, s.seq) AS instance_id
  FROM events a JOIN starts s ON s.run = a.run AND s.source = a.source AND s.seq < a.seq
  WHERE a.kind = 'assigned' GROUP BY a.run, a.source, a.seq, a.mono_ns),
judged AS (
  SELECT w.*, z.member_id AS zombie_member_id, rb.slack_ns,
    (z.member_id IS NOT NULL AND EXISTS (
       SELECT 1 FROM events f WHERE f.run = w.run AND f.kind = 'broker_log' AND f.log_event = 'member_failed'
         AND f.member_id = z.member_id AND (w.stale OR f.mono_ns >= w.z_ns) AND f.mono_ns <= w.end_ns + rb.slack_ns))
    OR (z.member_id IS NOT NULL AND EXISTS (
       SELECT 1 FROM events g WHERE g.run = w.run AND g.kind = 'group_state' AND g.group_id = w.group_id
         AND coalesce(g.state, '') <> 'Unknown' AND g.mono_ns >= w.z_ns AND g.mono_ns <= w.end_ns
         AND NOT exists(g.members, m -> m.member_id = z.member_id)))
    OR EXISTS (
       SELECT 1 FROM events x WHERE x.run = w.run AND x.source = w.zombie AND x.kind = 'error'
         AND upper(regexp_replace(element_at(split(x.error_name, '[.]'), -1), '([a-z0-9])([A-Z])', '$1_$2'))
             LIKE '%MAX_POLL%'
         AND x.mono_ns >= w.z_ns AND x.mono_ns <= w.end_ns + rb.slack_ns)
    OR (z.instance_id IS NOT NULL AND EXISTS (
       SELECT 1 FROM inst_events d WHERE d.run = w.run AND d.source <> w.zombie AND d.group_id = z.z_group
         AND d.instance_id = z.instance_id AND d.mono_ns >= w.z_ns AND d.mono_ns <= w.end_ns + rb.slack_ns))
    AS explained
  FROM w JOIN zid z ON z.run = w.run AND z.zombie = w.zombie AND z.w_seq = w.w_seq
  JOIN run_bounds rb ON rb.run = w.run),
zombie_work AS (  -- the zombie's first batch of the partition inside the window, then its first ok commit of it
  SELECT j.run, j.group_id, j.topic, j.partition, j.zombie, j.w_seq, min(c.seq) AS first_batch
  FROM judged j JOIN events c
    ON c.run = j.run AND c.source = j.zombie AND c.kind = 'consumed' AND c.group_id = j.group_id
   AND c.topic = j.topic AND c.partition = j.partition AND c.seq > j.w_seq AND (j.end_seq IS NULL OR c.seq < j.end_seq)
  WHERE j.explained GROUP BY j.run, j.group_id, j.topic, j.partition, j.zombie, j.w_seq),
zombie_commit AS (
  SELECT z.run, z.group_id, z.topic, z.partition, z.zombie, z.w_seq, min(k.seq) AS commit_seq
  FROM zombie_work z JOIN judged j
    ON j.run = z.run AND j.group_id = z.group_id AND j.topic = z.topic AND j.partition = z.partition
   AND j.zombie = z.zombie AND j.w_seq = z.w_seq
  JOIN events k ON k.run = z.run AND k.source = z.zombie AND k.kind = 'commit' AND k.outcome = 'ok'
   AND k.group_id = z.group_id AND k.seq > z.first_batch AND (j.end_seq IS NULL OR k.seq < j.end_seq)
   AND exists(k.commit_offsets, o -> o.topic = z.topic AND o.partition = z.partition)
  GROUP BY z.run, z.group_id, z.topic, z.partition, z.zombie, z.w_seq)
SELECT j.run, j.group_id, j.topic, j.partition, j.zombie, j.newer, j.w_seq, j.end_seq, c.commit_seq,
       CASE WHEN NOT j.explained THEN 'no eviction explains it' ELSE 'the zombie processed it and then got an accepted '
            || 'commit' END AS why
FROM judged j LEFT JOIN zombie_commit c
  ON c.run = j.run AND c.group_id = j.group_id AND c.topic = j.topic AND c.partition = j.partition
 AND c.zombie = j.zombie AND c.w_seq = j.w_seq
WHERE NOT j.explained OR c.commit_seq IS NOT NULL
"""

_SQL_GENERATIONS = """
WITH member_events AS (
  SELECT run, source, seq, kind, generation, incremental, outcome, partitions,
         sum(CASE WHEN kind IN ('member_start', 'member_stop') THEN 1 ELSE 0 END)
           OVER (PARTITION BY run, source ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS incarnation
  FROM events
  WHERE kind IN ('member_start', 'member_stop', 'assigned', 'revoked', 'lost', 'consumed', 'commit')),
observed AS (
  SELECT m.* FROM member_events m
  LEFT ANTI JOIN app_members a ON m.kind = 'consumed' AND m.run = a.run AND m.source = a.source
  WHERE m.kind NOT IN ('member_start', 'member_stop') AND m.generation IS NOT NULL AND m.generation >= 0
    AND (m.kind <> 'commit' OR m.outcome = 'ok')),
ranked AS (
  SELECT *, max(generation) OVER (PARTITION BY run, source, incarnation ORDER BY seq
                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS high
  FROM observed)
SELECT run, source, 'backwards' AS rule, min(seq) AS seq FROM ranked WHERE generation < high GROUP BY run, source
UNION ALL
SELECT run, source, 'different eager assignments in one generation' AS rule, min(seq) AS seq
FROM (SELECT run, source, seq, pset,
             first_value(pset) OVER (PARTITION BY run, source, incarnation, generation ORDER BY seq) AS first_pset
      FROM (SELECT *, array_sort(array_distinct(transform(partitions, p -> concat(p.topic, ':', p.partition))))
                        AS pset
            FROM observed WHERE kind = 'assigned' AND NOT coalesce(incremental, false)))
WHERE pset <> first_pset
GROUP BY run, source
"""


#: the delivery checker's two kinds of violation (chaos/checkers/delivery.py)
_LOST_TEXT = "never processed nor seen"
_COMMIT_AHEAD_TEXT = "had not been processed by the group"
#: a committed-offsets finding names its partition first: "group G T-P: ..."
_OFFSETS_KEY = re.compile(r"^group (\S+) (\S+)-(\d+): ")
#: an ownership-time window finding: "group G T-P: NEWER acquired it at Xs while ZOMBIE still held it; ..." and why
_WINDOW_KEY = re.compile(r"^group (\S+) (\S+)-(\d+): (\S+) acquired it at [\d.]+s while (\S+) still held it; .*"
                         r"(no eviction of \S+ explains it|processed it and then got an accepted commit)")
#: the same of a stale assignment: "group G T-P: ZOMBIE was handed it at Xs in generation g while NEWER held it in
#: generation h (a stale assignment); ..."
_STALE_WINDOW_KEY = re.compile(r"^group (\S+) (\S+)-(\d+): (\S+) was handed it at [\d.]+s in generation \d+ while "
                               r"(\S+) held it in generation \d+ \(a stale assignment\); .*"
                               r"(no eviction of \S+ explains it|processed it and then got an accepted commit)")


def _checker_of(invariant: str) -> str:
    return CHECKER_OF.get(invariant, invariant)


def _checker_side(violations_df) -> tuple[dict[tuple[str, str], dict[str, Any]], dict[tuple[str, str], int]]:
    """Per (run, invariant): whether the per-run checker reported the sub-rule re-checked here (its findings,
    an example, and for committed-offsets the (group, topic, partition) it names); and per (run, checker)
    how many violations checks.json lists in all (to tell a list the checker cut at ``max_findings``)."""
    from pyspark.sql import functions as F

    checkers = sorted({_checker_of(i) for i in INVARIANTS})
    rows = (violations_df.where(F.col("violation") & F.col("checker").isin(*checkers))
            .select("run", "checker", "description").orderBy("run", "checker", "finding").collect())
    out: dict[tuple[str, str], dict[str, Any]] = {}
    listed: dict[tuple[str, str], int] = {}
    for r in rows:
        d, inv = r["description"], r["checker"]
        listed[(r["run"], inv)] = listed.get((r["run"], inv), 0) + 1
        if inv == "ownership-generation" and "owned by both" not in d:
            continue  # sample-based findings: not re-checked here
        if inv == "generations" and d.startswith("group "):
            continue  # group-level rule: not re-checked here
        if inv == "delivery":
            if _COMMIT_AHEAD_TEXT in d:
                inv = "delivery-commits"
            elif _LOST_TEXT not in d:
                continue
        window = _WINDOW_KEY.match(d) if inv == "ownership-time" else None
        stale = _STALE_WINDOW_KEY.match(d) if inv == "ownership-time" and window is None else None
        if inv == "ownership-time" and window is None and stale is None:
            continue  # processing without holding: not re-checked here
        slot = out.setdefault((r["run"], inv), {"findings": 0, "example": d, "keys": {}})
        slot["findings"] += 1
        if inv == "committed-offsets" and (m := _OFFSETS_KEY.match(d)):
            slot["keys"].setdefault((m.group(1), m.group(2), int(m.group(3))), d)
        if window is not None:
            g, topic, part, newer, zombie = window.group(1, 2, 3, 4, 5)
            slot["keys"].setdefault((g, topic, int(part), zombie, newer), d)
        elif stale is not None:
            g, topic, part, zombie, newer = stale.group(1, 2, 3, 4, 5)
            slot["keys"].setdefault((g, topic, int(part), zombie, newer), d)
    return out, listed


def _bounds_view(spark, runs: list[str], bounds: Mapping[str, Mapping[str, Any] | None] | None) -> dict[str, int]:
    """Register ``run_bounds`` (run, slack_ns) from each run's checks.json ``bounds``; returns max_findings per run."""
    bounds = bounds or {}
    rows, limits = [], {}
    for run in runs:
        b = bounds.get(run) or {}
        slack = b.get("clock_slack_s")
        rows.append((run, int(round((DEFAULT_SLACK_S if slack is None else float(slack)) * 1_000_000_000))))
        limits[run] = int(b.get("max_findings") or DEFAULT_MAX_FINDINGS)
    spark.createDataFrame(rows, "run STRING, slack_ns BIGINT").createOrReplaceTempView("run_bounds")
    return limits


def _fmt_keys(keys) -> str:
    return ", ".join(f"group {g} {t}-{p}" for g, t, p in sorted(keys))


def _compare_commits(row: dict[str, Any], n: int, c: dict[str, Any] | None, lost_metric: Any,
                     listed_lost: int, listed_all: int, limit: int) -> None:
    """delivery-commits: Spark's commit-ahead findings against the checker's (one per commit and partition)."""
    listed = c["findings"] if c else 0
    if lost_metric is None:
        row.update(compared=False, note="checks.json has no delivery metrics: cannot tell a cut list")
        return
    # a list shorter than max_findings is whole; a full one too when it ends with every lost record (the
    # checker logs its commit findings before its lost ones)
    capped = listed_all >= limit and not (0 < int(lost_metric) == listed_lost)
    if not capped:
        row["agree"] = listed == n
        if not row["agree"]:
            row["note"] = f"checker: {listed} commit(s) ahead of processing, Spark: {n}"
    elif listed:
        row["agree"] = n >= listed
        row["note"] = "the checker's findings were cut at max_findings: compared that Spark finds at least as many"
        if not row["agree"]:
            row["note"] = f"checker listed {listed} commit(s) ahead of processing, Spark found {n}"
    else:
        row.update(compared=False, note="the checker's findings were cut at max_findings before any commit finding")


def _compare_offsets(row: dict[str, Any], spark_keys: dict[tuple[str, str, int], tuple[bool, str]],
                     c: dict[str, Any] | None, capped: bool) -> None:
    """committed-offsets: the set of (group, topic, partition) whose committed offset went back."""
    checker_keys: dict[tuple[str, str, int], str] = c["keys"] if c else {}
    row["spark_violations"], row["checker_findings"] = len(spark_keys), len(checker_keys)
    unparsed = (c["findings"] if c else 0) and not checker_keys
    if unparsed:
        row.update(compared=False, note="the checker's findings name no partition this re-check can read")
        return
    checker_only = set(checker_keys) - set(spark_keys)
    spark_only = set(spark_keys) - set(checker_keys)
    sure_spark_only = {k for k in spark_only if not spark_keys[k][0]}
    if checker_only or (sure_spark_only and not capped):
        row["agree"] = False
        row["note"] = "; ".join(x for x in (
            f"checker only: {_fmt_keys(checker_only)}" if checker_only else "",
            f"Spark only: {_fmt_keys(sure_spark_only)}" if sure_spark_only and not capped else "") if x)
        if checker_only:
            row["checker_example"] = checker_keys[min(checker_only)]
        if sure_spark_only and not capped:
            row["spark_example"] = spark_keys[min(sure_spark_only)][1]
    elif spark_only and not capped:
        row.update(compared=False, spark_example=spark_keys[min(spark_only)][1], note=(
            "a partition read below only in samples of a group a broker loaded: the checker's trailing-read "
            "rule (a new coordinator's first reads) and its read-behind-the-store rule (stored_offsets) are not "
            "re-checked"))
    else:
        row["agree"] = True
        if capped:
            row["note"] = "the checker's findings were cut at max_findings: compared the partitions it lists"


def _compare_windows(row: dict[str, Any], spark_keys: dict[tuple[str, str, int, str, str], str],
                     c: dict[str, Any] | None, capped: bool) -> None:
    """ownership-time: the set of (group, topic, partition, zombie, newer owner) whose overlap is a violation."""
    checker_keys: dict[tuple[str, str, int, str, str], str] = c["keys"] if c else {}
    row["spark_violations"], row["checker_findings"] = len(spark_keys), len(checker_keys)
    checker_only = sorted(set(checker_keys) - set(spark_keys))
    spark_only = sorted(set(spark_keys) - set(checker_keys))
    row["agree"] = not checker_only and (capped or not spark_only)
    if not row["agree"]:
        row["note"] = "; ".join(x for x in (
            f"checker only: {_fmt_windows(checker_only)}" if checker_only else "",
            f"Spark only: {_fmt_windows(spark_only)}" if spark_only and not capped else "") if x)
        if checker_only:
            row["checker_example"] = checker_keys[checker_only[0]]
        if spark_only:
            row["spark_example"] = spark_keys[spark_only[0]]
    elif capped:
        row["note"] = "the checker's findings were cut at max_findings: compared the windows it lists"


def _fmt_windows(keys: list[tuple[str, str, int, str, str]]) -> str:
    return ", ".join(f"{t}-{p} ({z} still holding, {n} acquiring)" for _, t, p, z, n in keys[:3]) + (
        f" and {len(keys) - 3} more" if len(keys) > 3 else "")


def recheck(spark, events_df, runs_df, violations_df,
            bounds: Mapping[str, Mapping[str, Any] | None] | None = None) -> tuple[list[dict[str, Any]], Any]:
    """One row per (judged run, invariant): Spark's answer, the checker's, and whether they agree.

    ``bounds``: each run's checks.json ``bounds`` (clock slack, max_findings); absent, the checkers' defaults.
    Returns the rows and a DataFrame of Spark's own findings (for the report's tables).
    """
    from pyspark.sql import functions as F

    events_df.createOrReplaceTempView("events")
    runs_df.select("run", F.explode("app_members").alias("source")).createOrReplaceTempView("app_members")
    run_list = [r["run"] for r in runs_df.select("run").collect()]
    limits = _bounds_view(spark, run_list, bounds)
    cooperative = {r["run"] for r in events_df.where((F.col("kind") == "member_start")
                                                     & (F.col("protocol") == "cooperative"))
                   .select("run").distinct().collect()}
    # runs whose commits may carry a stamp interval (ts_uncertain_ns, not in the events table): a member of
    # another client, or a committing source that never recorded a member_start
    members = events_df.where(F.col("kind") == "member_start").select("run", "source", "client")
    inexact = {r["run"] for r in members.where(~F.coalesce(F.col("client").isin(*EXACT_STAMP_CLIENTS), F.lit(False)))
               .select("run").distinct().collect()}
    # runs with a command (black-box) member: its commits are not recorded; the checker judges commit => processed on
    # the coordinator's committed offsets against the members' reports (chaos/checkers/delivery.py), not re-checked
    black_box = {r["run"] for r in members.where(F.col("client") == "command").select("run").distinct().collect()}
    inexact |= {r["run"] for r in events_df.where(F.col("kind") == "commit").select("run", "source").distinct()
                .join(members.select("run", "source").distinct(), ["run", "source"], "left_anti")
                .select("run").distinct().collect()}
    # KIP-848 groups: commits carry member epochs, judged against each member's own epoch timeline (not
    # re-checked). The events table has no group_type, so a run is taken for classic only when no coordinator
    # line of the KIP-848 protocol was logged and every committing group has a classic rebalance line.
    logs = events_df.where(F.col("kind") == "broker_log")
    kip848 = {r["run"] for r in logs.where(F.col("log_event").isin("epoch_bumped", "target_assignment"))
              .select("run").distinct().collect()}
    kip848 |= {r["run"] for r in events_df.where((F.col("kind") == "commit") & (F.col("outcome") == "ok"))
               .select("run", "group_id").distinct()
               .join(logs.where(F.col("log_event").isin("stabilized", "preparing_rebalance"))
                     .select("run", "group_id").distinct(), ["run", "group_id"], "left_anti")
               .select("run").distinct().collect()}
    own = spark.sql(_SQL_OWNERSHIP).select(
        "run", F.lit("ownership-generation").alias("invariant"),
        F.format_string("group %s generation %d: %s-%d assigned to %s", "group_id", "generation", "topic",
                        "partition", "sources").alias("detail"),
        F.array("first_seq", "last_seq").alias("evidence"))
    lost = spark.sql(_SQL_LOST).select(
        "run", F.lit("delivery").alias("invariant"),
        F.format_string("%s-%d@%d acknowledged, never consumed nor read at the end", "topic", "partition",
                        "record_offset").alias("detail"),
        F.array().cast("array<bigint>").alias("evidence"))
    ahead = spark.sql(_SQL_COMMIT_AHEAD).select(
        "run", F.lit("delivery-commits").alias("invariant"),
        F.format_string("group %s: %s committed %s-%d at %d%s, offset %d (acknowledged) not processed by the "
                        "group before", "group_id", "source", "topic", "partition", "n",
                        F.when(F.col("auto"), F.lit(" (auto-commit, judged after its next batch)"))
                        .otherwise(F.lit("")), "gap").alias("detail"),
        F.array("seq", "gap_send_seq").alias("evidence"))
    gens = spark.sql(_SQL_GENERATIONS).select(
        "run", F.lit("generations").alias("invariant"),
        F.format_string("%s: %s", "source", "rule").alias("detail"), F.array("seq").alias("evidence"))
    # rules that do not apply to a run leave no Spark finding there (the row says why it is not compared)
    back = spark.sql(_SQL_OFFSETS_BACK).where(~F.col("run").isin(*sorted(inexact)))
    offsets = back.select(
        "run", F.lit("committed-offsets").alias("invariant"),
        F.format_string("group %s %s-%d: committed offset below an earlier one (%d observation(s), first seq %d)",
                        "group_id", "topic", "partition", "observations", "first_seq").alias("detail"),
        F.array("first_seq").alias("evidence"))
    fencing = spark.sql(_SQL_FENCING).where(~F.col("run").isin(*sorted(inexact | kip848))).select(
        "run", F.lit("fencing").alias("invariant"),
        F.format_string("group %s: %s's commit (seq %d) accepted with generation %d while the coordinator was "
                        "at generation %d or later", "group_id", "source", "seq", "g", "lowest").alias("detail"),
        F.array("seq", "tl_seq").alias("evidence"))
    windows = spark.sql(_SQL_OWNERSHIP_TIME).where(~F.col("run").isin(*sorted(inexact))).cache()
    zombies = windows.select(
        "run", F.lit("ownership-time").alias("invariant"),
        F.format_string("group %s %s-%d: %s acquired it (seq %d) while %s still held it; %s", "group_id", "topic",
                        "partition", "newer", "w_seq", "zombie", "why").alias("detail"),
        F.expr("filter(array(w_seq, end_seq, commit_seq), x -> x IS NOT NULL)").alias("evidence"))
    findings = (own.unionByName(zombies).unionByName(lost).unionByName(ahead).unionByName(gens)
                .unionByName(offsets).unionByName(fencing).cache())
    # the example is the least detail, not F.first: first() follows the order partitions arrive in, which differs
    # between local[2] and a standalone master (a fresh-clone run named t-3 on one and t-2 on the other)
    spark_counts = {(r["run"], r["invariant"]): (r["n"], r["example"]) for r in
                    findings.groupBy("run", "invariant").agg(F.count("*").alias("n"),
                                                             F.min("detail").alias("example")).collect()}
    offset_keys: dict[str, dict[tuple[str, str, int], tuple[bool, str]]] = {}
    for r in back.collect():
        offset_keys.setdefault(r["run"], {})[(r["group_id"], r["topic"], int(r["partition"]))] = (
            bool(r["maybe_trailing"]),
            f"group {r['group_id']} {r['topic']}-{r['partition']}: committed offset below an earlier one "
            f"({r['observations']} observation(s), first seq {r['first_seq']})")
    window_keys: dict[str, dict[tuple[str, str, int, str, str], str]] = {}
    for r in windows.collect():
        window_keys.setdefault(r["run"], {}).setdefault(
            (r["group_id"], r["topic"], int(r["partition"]), r["zombie"], r["newer"]),
            f"group {r['group_id']} {r['topic']}-{r['partition']}: {r['newer']} acquired it (seq {r['w_seq']}) while "
            f"{r['zombie']} still held it; {r['why']}")
    checker, listed = _checker_side(violations_df)
    rows = []
    for r in runs_df.select("run", "date", "experiment", "judged", "lost", "failed_checkers",
                            "unknown_checkers").orderBy("run").collect():
        for inv in INVARIANTS:
            n, example = spark_counts.get((r["run"], inv), (0, None))
            c = checker.get((r["run"], inv))
            row = {"run": r["run"], "date": r["date"], "experiment": r["experiment"], "invariant": inv,
                   "spark_violations": n, "spark_example": example,
                   "checker_findings": c["findings"] if c else 0, "checker_example": c["example"] if c else None,
                   "compared": True, "agree": None, "note": None}
            if not r["judged"]:
                row.update(compared=False, note="no checks.json: run `chaos check` on it")
            elif _checker_of(inv) in (r["unknown_checkers"] or []):
                row.update(compared=False, note=f"the {_checker_of(inv)} checker answered unknown")
            elif inv == "ownership-generation" and r["run"] in cooperative:
                row.update(compared=False, note="cooperative rebalancing: the eager rule does not apply")
            elif inv == "delivery":
                lost = int(r["lost"]) if r["lost"] is not None else None
                row["checker_findings"] = lost if lost is not None else row["checker_findings"]
                row["agree"] = lost == n
                if not row["agree"]:
                    row["note"] = f"checker lost={lost}, Spark lost={n}"
            elif inv == "delivery-commits" and r["run"] in black_box:
                row.update(compared=False, note=(
                    "a command (black-box) member: its commits are not recorded; the checker judges the "
                    "coordinator's committed offsets against the reports, which this re-check does not cover"))
            elif inv == "delivery-commits":
                lost_listed = checker.get((r["run"], "delivery"), {}).get("findings", 0)
                _compare_commits(row, n, c, r["lost"], lost_listed, listed.get((r["run"], "delivery"), 0),
                                 limits.get(r["run"], DEFAULT_MAX_FINDINGS))
            elif inv == "committed-offsets":
                if r["run"] in inexact:
                    row.update(compared=False, note=(
                        "a member of a client that may stamp commits after the fact (ts_uncertain_ns, not in "
                        "the events table)"))
                else:
                    capped = listed.get((r["run"], "committed-offsets"), 0) >= limits.get(r["run"],
                                                                                          DEFAULT_MAX_FINDINGS)
                    _compare_offsets(row, offset_keys.get(r["run"], {}), c, capped)
            elif inv == "ownership-time" and r["run"] in inexact:
                row.update(compared=False, note=(
                    "a member of a client that may stamp ownership after the fact (ts_uncertain_ns, not in "
                    "the events table)"))
            elif inv == "ownership-time":
                capped = listed.get((r["run"], "ownership-time"), 0) >= limits.get(r["run"], DEFAULT_MAX_FINDINGS)
                _compare_windows(row, window_keys.get(r["run"], {}), c, capped)
            elif inv == "fencing" and r["run"] in inexact:
                row.update(compared=False, note=(
                    "a member of a client that may stamp commits after the fact (ts_uncertain_ns, not in "
                    "the events table)"))
            elif inv == "fencing" and r["run"] in kip848:
                row.update(compared=False, note=(
                    "KIP-848 group, or a committing group without classic rebalance lines: the member-epoch "
                    "rule is not re-checked"))
            else:
                row["agree"] = (n > 0) == (c is not None)
                if not row["agree"]:
                    row["note"] = ("Spark found a violation the checker did not report" if n else
                                   "the checker reported a violation Spark did not find")
            rows.append(row)
    return rows, findings

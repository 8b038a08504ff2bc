"""The dashboard's collapsed rows, for features a server has to switch on (most servers have no data
for them): start-up and cost, latency from vLLM's detail lines, speculative decoding, KV transfers and
offload, fault tolerance, sleep mode / DP / EPLB, MFU, `logwatch run`'s vLLM process, and the fleet
from the recording rules. grafana/build_dashboard.py places them after the open rows."""

from __future__ import annotations

from dashboard_kit import (
    COUNT,
    ENGINE,
    HOST,
    MODEL,
    PER_ENGINE,
    RATIO,
    SPECS,
    TARGET,
    TOKS,
    Layout,
    by_engine,
    increase,
    m,
    max_by,
    per_million,
    q,
    quantiles,
    rate,
    st,
    sum_by,
    ts,
)


def startup_and_cost(lay: Layout) -> None:
    lay.row("Start-up and cost", collapsed=True)
    lay.add(st(
        "Start-up durations",
        "The current launch's start-up phases from vLLM's start-up lines: model load, weights load, "
        "torch.compile, CUDA graph capture, engine init (profile, KV cache, warm-up).", "s",
        [q(max_by("instance, model_name, phase", f"{m('startup_seconds')}{{{MODEL}}}"),
           "{{phase}} {{instance}}", instant=True)]), 18, 6)
    lay.add(st(
        "GPUs", "GPUs of each launch: tensor x pipeline x data parallel size from its arguments.", COUNT,
        [q(max_by("instance, model_name", f"{m('gpus')}{{{MODEL}}}"), "{{instance}}", instant=True)]),
        6, 6)
    lay.add(ts(
        "Cost per 1M tokens",
        "GPUs x the GPU-hour price (the cost variable), over the tokens per second: what a million "
        "generated and prompt tokens cost at each moment's throughput (idle time makes it climb).",
        "currencyUSD",
        [q(per_million("generation_tokens", "$__rate_interval"), "generated"),
         q(per_million("prompt_tokens", "$__rate_interval"), "prompt")]), 12, 8)
    lay.add(ts(
        "Busy share by engine",
        "Share of time each engine computed tokens (busy_seconds per second): 1 is always busy, the "
        "rest is idle GPU time.", RATIO,
        [q(rate("busy_seconds"), PER_ENGINE)], max_val=1), 12, 8)


def spec_decode(lay: Layout) -> None:
    lay.row("Speculative decoding", collapsed=True)
    lay.add(ts(
        "Draft acceptance ratio",
        "Accepted / drafted speculative tokens: from the summed counts over the interval, and as "
        "each engine's last SpecDecoding line prints it.", RATIO,
        [q(f"{sum_by('instance, model_name', rate('spec_decode_accepted_tokens'))} / "
           f"{sum_by('instance, model_name', rate('spec_decode_drafted_tokens'))}",
           "{{instance}} (counters)"),
         q(by_engine("spec_decode_acceptance_ratio"), PER_ENGINE + " (last line)")],
        max_val=1), 8, 8)
    lay.add(ts(
        "Mean acceptance length",
        "Tokens produced per verification step (1 + accepted per draft) of each engine's last "
        "SpecDecoding line.", "short",
        [q(by_engine("spec_decode_mean_acceptance_length"), PER_ENGINE)]), 8, 8)
    lay.add(ts(
        "Accepted and drafted tokens",
        "Speculative tokens drafted and accepted per second (from the lines' Accepted/Drafted counts).",
        TOKS,
        [q(sum_by("instance, model_name", rate("spec_decode_drafted_tokens")), "Drafted {{instance}}"),
         q(sum_by("instance, model_name", rate("spec_decode_accepted_tokens")),
           "Accepted {{instance}}")]), 8, 8)
    lay.add(ts(
        "Acceptance by draft position",
        "Acceptance rate of each draft position (0: the first drafted token) in each engine's last "
        "SpecDecoding line (Per-position acceptance rate): where it drops, more drafted tokens are waste.",
        RATIO,
        [q(by_engine("spec_decode_position_acceptance_ratio"), "position {{position}} " + PER_ENGINE)],
        max_val=1), 24, 8)


def latency(lay: Layout) -> None:
    """vLLM's detail lines (--enable-logging-iteration-details, --enable-log-requests,
    --enable-log-outputs): exporting/latency_state.py."""
    lay.row("Latency (vllm serve --enable-logging-iteration-details --enable-log-requests)", collapsed=True)
    tbt = SPECS["time_between_tokens_seconds"].name
    lay.add(ts(
        "Time between tokens by concurrency",
        "Mean time between an engine's generating steps by batch (the step's generation requests, "
        "bucketed): what one stream waits for its next token at that concurrency, the step and what "
        "vLLM does between steps, as vLLM's inter-token latency. A mean over the interval: vLLM prints "
        "the step lines in bursts, so single gaps mean nothing. p90 of the decode steps' own time (the "
        "VLLMDecodeStepSlow alert's figure) beside it.", "s",
        [q(f"{sum_by('instance, model_name, batch', f'rate({tbt}_sum{{{ENGINE}}}[$__rate_interval])')} / "
           f"{sum_by('instance, model_name, batch', f'rate({tbt}_count{{{ENGINE}}}[$__rate_interval])')}",
           "mean at {{batch}} streams {{instance}}"),
         *quantiles("step_duration_seconds", ENGINE + ', phase="decode"', "instance, model_name, batch",
                    "decode step at {{batch}} streams {{instance}}", (0.9,))]), 12, 8)
    lay.add(ts(
        "End-to-end request time",
        "Percentiles of the time from a request's Received line to its last response line "
        "(--enable-log-requests --enable-log-outputs), timed by when the lines were read live or by "
        "a container's stamps (vLLM's own stamps have whole seconds: such requests are counted in "
        "requests_untimed, not here).", "s",
        quantiles("request_duration_seconds", MODEL, "instance, model_name", "{{instance}}",
                  (0.5, 0.9, 0.99))), 12, 8)
    lay.add(ts(
        "Time to first token",
        "Percentiles of the time from a request's Received line to its first streamed output line "
        "(logged only with --enable-log-outputs, for streams): later than vLLM's own time to first "
        "token, which the engine takes.", "s",
        quantiles("time_to_first_token_seconds", MODEL, "instance, model_name", "{{instance}}",
                  (0.5, 0.9))), 8, 8)
    lay.add(ts(
        "Requests by finish reason",
        "Requests ended per second by finish reason (stop, length, abort, ...; unknown: a stream "
        "whose end vLLM logged without one).", "reqps",
        [q(sum_by("instance, finish_reason", rate("requests", MODEL)), "{{finish_reason}} {{instance}}")],
        stack=True), 8, 8)
    lay.add(ts(
        "Requests by LoRA adapter",
        "Requests ended per second by LoRA adapter (names from the log's `Loaded new LoRA adapter` "
        "lines, at most 16, then other; the base model without one).", "reqps",
        [q(f'label_replace({sum_by("instance, lora", rate("requests", MODEL))}, "lora", "base model", '
           f'"lora", "")', "{{lora}} {{instance}}")],
        stack=True), 8, 8)


def run_mode(lay: Layout) -> None:
    lay.row("vLLM process (logwatch run)", collapsed=True)
    lay.add(st(
        "vLLM process",
        "Whether the vLLM server that `logwatch run` supervises is running (run mode only).", "none",
        [q(max_by("instance", f"{m('child_up')}{{{HOST}}}"), "{{instance}}", instant=True)],
        mappings={"1": ("RUNNING", "green"), "0": ("DOWN", "red")}, color_background=True), 6, 6)
    lay.add(st(
        "vLLM process uptime",
        "Time since the supervised vLLM process started.", "s",
        [q("time() - " + max_by("instance", f"{m('child_start_time_seconds')}{{{HOST}}}"), "{{instance}}",
           instant=True)]), 6, 6)
    lay.add(st(
        "Last exit code",
        "Exit code of the last vLLM process (128+N for signal N: 137 SIGKILL, often the OOM "
        "killer; 143 SIGTERM).", "none",
        [q(max_by("instance", f"{m('child_last_exit_code')}{{{HOST}}}"), "{{instance}}",
           instant=True)],
        thresholds=((None, "green"), (1, "red"))), 6, 6)
    lay.add(st(
        "Restarts in the time range",
        "vLLM restarts by `logwatch run` over the dashboard's time range.", COUNT,
        [q(sum_by("instance", f"increase({m('child_restarts')}{{{HOST}}}[$__range])"), "{{instance}}",
           instant=True)],
        thresholds=((None, "green"), (1, "orange"), (3, "red"))), 6, 6)
    lay.add(ts(
        "vLLM restarts and log write errors",
        "Restarts of the supervised vLLM process and failed writes to its log file (full disk) per "
        "interval.", COUNT,
        [q(sum_by("instance", increase("child_restarts")), "restarts {{instance}}"),
         q(sum_by("instance", increase("log_file_write_errors")), "write errors {{instance}}")],
        bars=True, interval="1m", calcs=("sum", "max")), 12, 8)
    lay.add(ts(
        "vLLM output to the log file",
        "Bytes per second of vLLM output written to the launch log, and dropped (never blocks vLLM): "
        "from the file, from parsing (the parser fell behind) and from the echo to stdout.",
        "Bps",
        [q(sum_by("instance", rate("log_file_bytes_written", HOST)), "written {{instance}}"),
         q(sum_by("instance", rate("log_file_bytes_dropped", HOST)), "dropped {{instance}}"),
         q(sum_by("instance", rate("parse_bytes_dropped", HOST)), "not parsed {{instance}}"),
         q(sum_by("instance", rate("stdout_bytes_dropped", HOST)), "not echoed {{instance}}")]), 12, 8)


def kv_transfers(lay: Layout) -> None:
    lay.row("KV transfers and offload (KV connectors)", collapsed=True)
    lay.add(ts(
        "Transfers by result",
        "KV / EC connector transfers per second (NIXL, Mooncake, offloading; the `KV Transfer "
        "metrics:` lines) by result: succeeded, failed, failed_recv. Any failure is worth a look: "
        "see the VLLMKVTransferFailures alert.", "count:transfers/s",
        [q(sum_by("instance, model_name, cache, result", rate("transfers")),
           "{{result}} {{cache}} {{instance}}")]), 8, 8)
    lay.add(ts(
        "Expired requests",
        "Requests per second whose KV blocks expired before the other side fetched them (Num KV "
        "expired reqs): the decode instance did not pull in time (VLLM_NIXL_ABORT_REQUEST_TIMEOUT).",
        "reqps",
        [q(sum_by("instance, model_name, cache", rate("transfer_expired_requests")),
           "expired {{cache}} {{instance}}")]), 8, 8)
    lay.add(ts(
        "Bytes transferred",
        "Bytes per second moved by successful transfers (transfers x Avg MB per transfer; vLLM's MB "
        "is MiB).", "Bps",
        [q(sum_by("instance, model_name, cache", rate("transfer_bytes")), "{{cache}} {{instance}}")]),
        8, 8)
    lay.add(ts(
        "Transfer time",
        "Average and p90 time of one transfer in each engine's last interval with transfers (the "
        "line is printed only for intervals with transfers, so the value holds until the next one).",
        "s",
        [q(by_engine("transfer_time_seconds"), "{{stat}} {{cache}} " + PER_ENGINE)]), 8, 8)
    lay.add(ts(
        "Post time",
        "Average and p90 time to post a transfer (hand it to the transport) in each engine's last "
        "interval with transfers.", "s",
        [q(by_engine("transfer_post_time_seconds"), "{{stat}} {{cache}} " + PER_ENGINE)]), 8, 8)
    lay.add(ts(
        "Transfer throughput",
        "Throughput of the transfers in each engine's last interval with transfers, as the line "
        "prints it (bytes over transfer time, not over the interval: see Bytes transferred).", "Bps",
        [q(by_engine("transfer_throughput_bytes_per_second"), "{{cache}} " + PER_ENGINE)]), 8, 8)
    offload(lay)


def offload(lay: Layout) -> None:
    """The offloading connector (--kv-offloading-size; vLLM 0.33's `vllm:kv_offload_*` keys), its
    secondary tiers, HiSparse, and the requests fetching KV from a connector."""
    by_dir = "instance, model_name, direction"
    lay.add(ts(
        "Offload traffic",
        "Bytes per second the offloading connector moved (load: to the device; store: from it), read from "
        "and written to each secondary tier, and HiSparse's host-to-device copies.", "Bps",
        [q(sum_by(by_dir, rate("offload_bytes")), "{{direction}} {{instance}}"),
         q(sum_by("instance, model_name, tier, direction", rate("offload_tier_bytes")),
           "tier {{tier}} {{direction}} {{instance}}"),
         q(sum_by("instance, model_name", rate("hisparse_host_to_device_bytes")), "HiSparse {{instance}}")]),
        8, 8)
    lay.add(ts(
        "Offload time share",
        "Seconds spent moving offloaded KV per second of wall time, by direction and by tier (1: always "
        "moving).", RATIO,
        [q(sum_by(by_dir, rate("offload_time_seconds")), "{{direction}} {{instance}}"),
         q(sum_by("instance, model_name, tier, direction", rate("offload_tier_time_seconds")),
           "tier {{tier}} {{direction}} {{instance}}")]), 8, 8)
    lay.add(ts(
        "Offload operations",
        "Per second: offload loads and stores, promotions from a tier to the primary one by result, and "
        "HiSparse hot-buffer lookups by result.", "ops",
        [q(sum_by(by_dir, rate("offload_operations")), "{{direction}} {{instance}}"),
         q(sum_by("instance, model_name, tier, result", rate("offload_tier_promotions")),
           "tier {{tier}} promotion {{result}} {{instance}}"),
         q(sum_by("instance, model_name, result", rate("hisparse_lookups")),
           "HiSparse {{result}} {{instance}}")]),
        8, 8)
    promotions = "instance, model_name, tier, result"
    lay.add(ts(
        "Tier promotion time",
        "Mean time of a promotion from each tier to the primary one over the interval.", "s",
        [q(f"{sum_by(promotions, rate('offload_tier_promotion_seconds'))} / "
           f"{sum_by(promotions, rate('offload_tier_promotions'))}",
           "tier {{tier}} {{result}} {{instance}}")]),
        8, 8)
    lay.add(ts(
        "Offload caches",
        "Usage of the CPU offload cache and of HiSparse's host KV cache, and HiSparse's hot-buffer hit "
        "ratio, from each engine's last transfer line.", RATIO,
        [q(by_engine("offload_cpu_cache_usage_ratio"), "CPU offload " + PER_ENGINE),
         q(by_engine("hisparse_host_cache_usage_ratio"), "HiSparse host " + PER_ENGINE),
         q(by_engine("hisparse_hit_ratio"), "HiSparse hits " + PER_ENGINE)], max_val=1), 8, 8)
    lay.add(ts(
        "Offload failures",
        "Offload stores that failed or were dropped, by reason, and failed tier jobs, by operation, per "
        "interval.", COUNT,
        [q(sum_by("instance, reason", increase("offload_failures", ENGINE)), "{{reason}} {{instance}}"),
         q(sum_by("instance, tier, operation", increase("offload_tier_job_failures", ENGINE)),
           "tier {{tier}} {{operation}} {{instance}}")],
        bars=True, interval="1m", calcs=("sum", "max")), 8, 8)
    lay.add(ts(
        "KV fetch",
        "Requests fetching KV from a connector at each engine's last stats line (KV fetch field), by "
        "stage: waiting to start, in progress, completed and waiting.", COUNT,
        [q(by_engine("kv_fetch_requests"), "{{stage}} " + PER_ENGINE)]), 24, 8)


def fault_tolerance(lay: Layout) -> None:
    lay.row("Fault tolerance and KV offload failures (vLLM 0.34)", collapsed=True)
    lay.add(ts(
        "Engine status",
        "1 while the engine is in that fault-tolerance status (`[FT] Engine N status -> S`, "
        "--enable-fault-tolerance): healthy, diagnosing, unhealthy or dead. See VLLMEngineNotHealthy.",
        COUNT, [q(max_by("instance, engine, status", f"{m('engine_fault_tolerance_status')}{{{HOST}}}")
                  + " > 0", "{{status}} " + PER_ENGINE)]), 8, 8)
    lay.add(ts(
        "Rejected requests and faults",
        "Requests refused while the engine was not healthy (`Engine S - rejecting request R.`), by "
        "status, and engine faults (`[FT] Busy loop raised E`), per interval.", COUNT,
        [q(sum_by("instance, status", increase("rejected_requests")), "rejected ({{status}}) {{instance}}"),
         q(sum_by("instance", increase("engine_faults")), "faults {{instance}}")]), 8, 8)
    lay.add(ts(
        "Offload and connector failures",
        "KV offload jobs that failed (store: its chunks dropped from the CPU cache; load), chunks "
        "dropped, and openings of a KV connector's circuit breaker, per interval.", COUNT,
        [q(sum_by("instance, direction", increase("kv_offload_job_failures")),
           "{{direction}} jobs failed {{instance}}"),
         q(sum_by("instance", increase("kv_offload_chunks_dropped")), "chunks dropped {{instance}}"),
         q(sum_by("instance, breaker", increase("kv_connector_breaker_openings")),
           "{{breaker}} breaker opened {{instance}}")]), 8, 8)


def runtime(lay: Layout) -> None:
    """Sleep mode, the data-parallel supervisor and expert-parallel load balancing: per server."""
    lay.row("Sleep mode, data-parallel supervisor and EPLB", collapsed=True)
    lay.add(ts(
        "Asleep",
        "1 while the engine sleeps (--enable-sleep-mode: from `fall asleep` until its KV cache wakes up); "
        "a sleeping engine is never counted stalled.", COUNT,
        [q(max_by("instance", f"{m('asleep')}{{{HOST}}}"), "{{instance}}")], max_val=1), 8, 8)
    lay.add(ts(
        "Sleep transitions",
        "Sleep, wake-up and discard lines per interval.", COUNT,
        [q(sum_by("instance, transition", increase("sleep_transitions")), "{{transition}} {{instance}}")],
        bars=True, interval="1m", calcs=("sum", "max")), 8, 8)
    lay.add(st(
        "Sleep transition time",
        "Duration of the last sleep, wake-up and discard.", "s",
        [q(max_by("instance, transition", f"{m('sleep_transition_seconds')}{{{HOST}}}"),
           "{{transition}} {{instance}}", instant=True)]), 8, 8)
    lay.add(ts(
        "Data-parallel servers unhealthy or exited",
        "DP servers the DP supervisor last found unhealthy or exited (--data-parallel-supervisor-port): it "
        "then shuts the deployment down.", COUNT,
        [q(max_by("instance", f"{m('dp_servers_unhealthy')}{{{HOST}}}"), "unhealthy {{instance}}"),
         q(max_by("instance", f"{m('dp_servers_exited')}{{{HOST}}}"), "exited {{instance}}")]), 8, 8)
    lay.add(ts(
        "Expert load balancedness",
        "Mean over max tokens per expert-parallel rank of the last EPLB step line (1 is balanced).", RATIO,
        [q(max_by("instance", f"{m('eplb_balancedness')}{{{HOST}}}"), "{{instance}}")], max_val=1), 8, 8)
    lay.add(ts(
        "Expert rearrangements",
        "Expert rearrangements (EPLB) per interval, and the last one's duration.", COUNT,
        [q(sum_by("instance", increase("eplb_rearrangements")), "rearrangements {{instance}}"),
         q(max_by("instance", f"{m('eplb_rearrangement_seconds')}{{{HOST}}}"),
           "last one's seconds {{instance}}")]),
        8, 8)


def mfu(lay: Layout) -> None:
    lay.row("Model FLOPs and memory traffic (vllm serve --enable-mfu-metrics)", collapsed=True)
    lay.add(ts(
        "Model FLOPs per device",
        "vLLM's own estimate of the model's floating-point operations per second per device (GPU) in "
        "each engine's last MFU line (`--enable-mfu-metrics`, vLLM >= 0.14). Against the device's "
        "peak it is the model FLOPs utilisation: low at low concurrency, where decoding is memory-bound.",
        "flops", [q(by_engine("mfu_flops_per_second"), PER_ENGINE)]), 12, 8)
    lay.add(ts(
        "Memory traffic per device",
        "vLLM's estimate of the bytes read and written per second per device (weights, KV cache, "
        "activations) in each engine's last MFU line. Against the device's memory bandwidth it tells "
        "how memory-bound decoding is.", "Bps",
        [q(by_engine("mfu_memory_bytes_per_second"), PER_ENGINE)]), 12, 8)


FLEET = TARGET + ', model_name=~"$model_name"'
"""The recorded series of grafana/recording-rules.yml keep job, instance and model_name alone."""


def fleet(lay: Layout) -> None:
    """Per model across the selected instances, and the busiest instances, from the recording rules."""
    def rec(short: str, agg: str = "sum", by_: str = "model_name") -> str:
        return f"{agg} by ({by_}) (instance_model_name:vllm_logwatch_{short}{{{FLEET}}})"

    lay.row("Fleet: per model across instances (grafana/recording-rules.yml)", collapsed=True)
    note = " From the recording rules (grafana/recording-rules.yml): load them next to the alerts."
    lay.add(ts("Generation throughput by model", "Generated tokens a second per model, summed over the "
               "selected instances, their engines and sources; and the fleet's total." + note, TOKS,
               [q(rec("generation_tokens:rate1m"), "{{model_name}}"),
                q(f"sum(instance_model_name:vllm_logwatch_generation_tokens:rate1m{{{FLEET}}})", "fleet")]),
            8, 8)
    lay.add(ts("Running and waiting by model", "Requests running and waiting per model over the "
               "selected instances." + note, COUNT,
               [q(rec("requests_running:sum"), "{{model_name}} running"),
                q(rec("requests_waiting:sum"), "{{model_name}} waiting")]), 8, 8)
    lay.add(ts("KV pressure by model", "The fullest engine's KV cache per model over the selected "
               "instances (preemptions by model: model_name:vllm_logwatch_preemptions:rate5m, recorded "
               "where the stats lines print them)." + note, RATIO,
               [q(rec("kv_cache_usage_ratio:max", "max"), "{{model_name}}")], max_val=1), 8, 8)
    lay.add(ts("Top instances by waiting", "The five instances with the most requests waiting: where "
               "the fleet runs short." + note, COUNT,
               [q(f"topk(5, {rec('requests_waiting:sum', by_='instance')})", "{{instance}}")]), 12, 8)
    lay.add(ts("Top instances by KV usage", "The five instances with the fullest KV cache." + note, RATIO,
               [q(f"topk(5, {rec('kv_cache_usage_ratio:max', 'max', 'instance')})", "{{instance}}")],
               max_val=1), 12, 8)

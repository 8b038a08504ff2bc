"""Settings of `logwatch watch` and `logwatch demo`, with a visible precedence: command line, then
`LOGWATCH_*` environment variables, then defaults.

Every option has one environment variable, named after it (`--poll-interval` is
`LOGWATCH_POLL_INTERVAL`), so a systemd unit or a container can configure the exporter without a
command line. `--help` shows each option's variable and default (`option_help`), and an invalid value
is a one-line `UsageError` that names where it came from.

>>> s = load_settings(WatchSettings, {"target": "/logs", "port": 9500}, {"LOGWATCH_PORT": "9600",
...                                                                    "LOGWATCH_POLL_INTERVAL": "0.5"})
>>> s.port, s.poll_interval, s.listen
(9500, 0.5, '0.0.0.0')
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationError, field_validator
from pydantic.functional_validators import AfterValidator, BeforeValidator

from .errors import UsageError
from .parsing.stamps import resolve_zone
from .web.webconfig import WebConfig, load_web_config

ENV_PREFIX = "LOGWATCH_"
DEFAULT_PORT = 9477
"""Not one of the ports common on GPU hosts (vLLM 8000, Grafana 3000, Prometheus 9090, node exporter
9100, DCGM exporter 9400, OpenTelemetry 9464). Prometheus' exporter port list has been full since
2023, so another, rarer exporter may have claimed it; `--port` / `LOGWATCH_PORT` move it."""

_OPTION_NAMES = {"labels": "--label", "target": "TARGET"}
_DEFAULT_SHOWN = {
    "target": "none, required",
    "stats_interval": "measured from the lines",
    "tz": "this machine's zone",
}

Settings = TypeVar("Settings", bound=BaseModel)


def env_name(field: str) -> str:
    """The environment variable of a settings field.

    >>> env_name("poll_interval")
    'LOGWATCH_POLL_INTERVAL'
    """
    return ENV_PREFIX + field.upper()


def option_name(field: str) -> str:
    """The command-line spelling of a settings field (`labels` is the repeatable `--label`)."""
    return _OPTION_NAMES.get(field, "--" + field.replace("_", "-"))


def _path(value: object) -> str:
    """A path as the command line or the environment gave it: any `str`, undecodable bytes included
    (Python keeps them as surrogates, which pydantic's own `str` refuses), but not empty."""
    if not isinstance(value, str):
        raise ValueError("a path must be text")
    if not value:
        raise ValueError("a path must not be empty")
    return value


FsPath = Annotated[str, PlainValidator(_path)]
"""A file or folder name, which need not be valid UTF-8 (a Linux name is bytes)."""


def _within(low: float, high: float, message: str, *, above: bool = False) -> AfterValidator:
    """A number's check: finite, from `low` (above it when `above`) to `high`, else `message`."""

    def check(value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and (value > low if above else value >= low)
                                      and value <= high):
            raise ValueError(message)
        return value

    return AfterValidator(check)


def _comma_list(value: Any) -> Any:
    """A list given in the environment: comma-separated (`k=v,k2=v2`, `ns/*,other`)."""
    return [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value


def _positive(what: str) -> AfterValidator:
    return _within(0, math.inf, f"{what} must be a positive number of seconds", above=True)


class _Listening(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    listen: str = Field(
        default="0.0.0.0", min_length=1,
        description="address to listen on; 0.0.0.0 is every IPv4 address (Prometheus usually scrapes "
        "from another host), 127.0.0.1 this host only")
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535,
                      description="TCP port of /metrics (0: any free port)")
    poll_interval: Annotated[float, _positive("poll interval"),
                             _within(0, 3600, "poll interval must be at most 3600 seconds")] = Field(
        default=1.0,
        description="seconds between two stat() checks of the files; file notifications wake the "
        "follower sooner, this is the backstop")
    web_config: WebConfig | None = Field(
        default=None, description="TLS and basic auth, from a web configuration file in the format of "
        "Prometheus' exporters (tls_server_config, basic_auth_users, http_server_config.headers); "
        "checked at start")

    @field_validator("web_config", mode="before")
    @classmethod
    def _web_config(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return load_web_config(value)
            except UsageError as exc:
                raise ValueError(str(exc)) from None
        return value


class _Exporting(_Listening):
    """The exporter options `watch` and `run` share: how the counters, labels and times are made."""

    stats_interval: Annotated[float | None, _positive("stats interval")] = Field(
        default=None, description="vLLM's VLLM_LOG_STATS_INTERVAL in seconds, for the token counters")
    labels: dict[str, str] = Field(
        default_factory=dict, description="k=v label added to every series (repeatable; in the "
        "environment: comma-separated k=v,k2=v2)")
    tz: str | None = Field(
        default=None, description="zone the vLLM server logged in, e.g. UTC")
    records: FsPath | None = Field(
        default=None, description="also write the stats records read, as 'parse --jsonl' writes them (no "
        "log text), to this file (rotated at 64 MiB, 3 kept: FILE.1 ...) for a log shipper, or - for "
        "standard output (watch only); never waits: records a slow sink cannot take are dropped and "
        "counted (vllm_logwatch_records_dropped_total); watch with --state-file: a restart (kill -9 "
        "too) writes no record to FILE twice (standard output: no such promise)")

    @field_validator("tz")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        if value:
            resolve_zone(value)  # ValueError with a hint for an unknown zone
        return value or None

    @field_validator("labels", mode="before")
    @classmethod
    def _labels(cls, value: Any) -> Any:
        value = _comma_list(value)
        if isinstance(value, (list, tuple)):
            pairs: dict[str, str] = {}
            for item in value:
                key, sep, val = str(item).partition("=")
                key = key.strip()
                if not sep:  # the name is checked with the exporter's own (`catalogue.check_const_labels`)
                    raise ValueError(f"{str(item)!r} is not k=v")
                pairs[key] = val.strip()
            return pairs
        return value


class WatchSettings(_Exporting):
    """What `logwatch watch` needs. Paths are kept as given; the follower makes them absolute."""

    target: FsPath = Field(
        description="a log file, a folder (follows its newest launch file; or its many "
        "sources: see --layout), a quoted glob, or "
        "- for standard input (a pipe from docker logs -f, kubectl logs -f, journalctl -f -o cat; a named "
        "pipe is read the same way), read to its end and served on after it")
    from_start: bool = Field(
        default=False,
        description="read the first file from its start, not only the lines written from now on")
    state_file: FsPath | None = Field(
        default=None, description="remember the position here (written within 0.1 s, before a scrape shows "
        "a line), so a restart, even after kill -9, neither skips a line nor counts again one a scrape saw")
    pattern: str = Field(default="*.log", min_length=1, description="file names a folder target follows")
    layout: Literal["auto", "scripts", "pods", "docker"] = Field(
        default="auto", description="what a folder target holds: scripts (launch files, one source per "
        "launch-script name, label script), pods (a kubelet tree such as /var/log/pods, labels namespace, "
        "pod, container), docker (/var/lib/docker/containers, label container: its name). auto: what the "
        "folder holds at start (a kubelet or Docker tree, or two or more scripts' files); a folder of one "
        "script's files, or still empty, is one source (its newest file), as it always was")
    select: Annotated[list[str], BeforeValidator(_comma_list)] = Field(
        default_factory=list, description="keep only the sources whose name matches this glob (repeatable; "
        "in the environment: comma-separated): pods namespace/pod/container, docker the container's "
        "name, scripts the script's name")
    max_sources: int = Field(
        default=100, ge=1, le=1000, description="sources read at most; the ones found beyond are read "
        "into one folded source (labels _folded) and counted")
    source_grace: Annotated[float, _within(
        0, 7 * 86400, "source grace must be from 0 to 604800 seconds")] = Field(
        default=300.0, description="seconds a source whose files are all gone keeps its series, then "
        "they are dropped")


class DemoSettings(_Listening):
    """What `logwatch demo` needs. It listens on this host only unless told otherwise: it is a try-out."""

    listen: str = Field(
        default="127.0.0.1", min_length=1, description="address to listen on (0.0.0.0: every IPv4 address)")
    # Below 0.01 a gap between two lines would be a wait of days (and past ~1e-292 too long to wait).
    speed: Annotated[float, _within(0.01, 10_000, "speed must be a number from 0.01 to 10000")] = Field(
        default=10.0, description="replay speed, 0.01 to 10000: 10 plays the log's 3 minutes in 18 seconds, "
        "then starts a new launch file")


def option_help(model: type[BaseModel], field: str) -> str:
    """Help text of an option, ending in its environment variable and default.

    >>> option_help(WatchSettings, "port")
    'TCP port of /metrics (0: any free port) [env LOGWATCH_PORT; default 9477]'
    """
    info = model.model_fields[field]
    default = None if info.is_required() else info.get_default(call_default_factory=True)
    if field in _DEFAULT_SHOWN:
        shown = _DEFAULT_SHOWN[field]
    elif default in (None, {}, []):
        shown = "none"
    elif isinstance(default, bool):
        shown = "on" if default else "off"
    else:
        shown = str(default)
    return f"{info.description} [env {env_name(field)}; default {shown}]"


def load_settings(
    model: type[Settings], cli: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> Settings:
    """Build settings: a value given on the command line (not None) wins, then a non-empty
    `LOGWATCH_*` variable, then the default. Raises `UsageError` naming the option or variable."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for field in model.model_fields:
        given = cli.get(field)
        if given is not None and given != []:
            values[field], origin[field] = given, option_name(field)
            continue
        env = environ.get(env_name(field), "")
        if env.strip():
            values[field], origin[field] = env.strip(), env_name(field)
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        field = str(error["loc"][0]) if error["loc"] else ""
        where = origin.get(field, option_name(field) if field else "settings")
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "missing":
            raise UsageError(f"{where} is required (or set {env_name(field)})") from None
        shown = values.get(field)
        value = f" {shown!r}" if isinstance(shown, (str, int, float)) else ""
        raise UsageError(f"{where}{value}: {message}") from None


Seconds = Annotated[float, _within(0, math.inf, "must be a number of seconds, 0 or more")]


class RunSettings(_Exporting):
    """What `logwatch run` needs besides the command: where the launch files go, how to stop and
    restart vLLM, and the exporter options it shares with `watch`."""

    log_dir: FsPath = Field(default="logs",
                         description="folder of the launch files <name>_<YYYYmmdd_HHMMSS>.log")
    name: str | None = Field(default=None, description="file name stem (default: the served model name "
                             "from the command line, else vllm)")
    restart: Literal["no", "on-failure", "always"] = Field(
        default="no", description="restart vLLM when it exits: no, on-failure (exit code not 0) or always; "
        "never after a failure during start-up")
    stop_timeout: Seconds = Field(default=30.0,
                                  description="seconds between SIGTERM and SIGKILL when stopping")
    startup_grace: Seconds = Field(
        default=60.0, description="a vLLM that exits within this many seconds of its start counts as a "
        "start-up failure and is not restarted")

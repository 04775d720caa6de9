"""Settings, read from the environment (prefix ``RETRIEVER_``) plus ``DATABASE_URL``."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from retriever import request_context
from retriever.errors import ConfigError
from retriever.feedback import Policy
from retriever.ranking import Fusion

DEFAULT_MODEL = "minishlab/potion-base-8M"


class Settings(BaseSettings):
    # NaN and infinity are refused everywhere: a NaN weight sorts results at random and
    # writes NaN into JSON.
    model_config = SettingsConfigDict(env_prefix="RETRIEVER_", extra="ignore", allow_inf_nan=False)

    vault: Path = Field(default=Path("."), description="Folder of markdown notes to index")
    home: Path = Field(
        default_factory=lambda: Path(platformdirs.user_data_dir("retriever")),
        description="Where the embedded database and caches live",
    )
    database_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DATABASE_URL", "RETRIEVER_DATABASE_URL"),
        description="libpq URL of a Postgres with pgvector; unset = embedded server",
    )
    embed_model: str = Field(
        default=DEFAULT_MODEL, description="Primary tier: Model2Vec id/path or ollama:<model>"
    )
    # The second tier answers while the primary is away (Ollama stopped, still pulling, ...).
    fallback_model: str = Field(
        default="auto",
        description="Second tier: a Model2Vec id/path; auto = the built-in Model2Vec model"
        " when the primary is an Ollama model; none = no second tier",
    )
    embed_dim: int | None = Field(
        default=None, description="Dimension the primary model must answer with (checked first)"
    )
    ollama_url: str = Field(default="http://127.0.0.1:11434")
    ollama_timeout: float = Field(default=60.0, gt=0)
    probe_timeout: float = Field(
        default=5.0,
        gt=0,
        description="Seconds a tier probe or a query embedding may wait before the next tier answers",
    )
    probe_interval_max: float = Field(
        default=30.0, gt=0, description="Longest wait between two probes of a tier that is down"
    )
    embed_batch: int = Field(default=512, ge=1)

    include: list[str] = Field(default_factory=lambda: ["**/*.md"])
    exclude: list[str] = Field(default_factory=list)
    max_file_bytes: int = Field(default=2_000_000, ge=1)

    chunk_min_chars: int = Field(default=30, ge=0)
    chunk_max_chars: int = Field(default=2000, ge=100)

    bm25_k1: float = Field(default=1.2, ge=0)
    bm25_b: float = Field(default=0.75, ge=0, le=1)

    # Ranking: calibrated per (vault, model) after indexing; a value set here overrides
    # the calibrated choice (unset = calibrated, or the defaults before calibration).
    fusion: Fusion = Field(
        default="auto", description="auto | linear | rrf | rrf30 | interleave | lexical | semantic"
    )
    graph: bool = Field(default=True, description="Lift linked neighbours (random walk)")
    graph_weight: float | None = Field(default=None, ge=0)
    semantic_weight: float | None = Field(
        default=None, ge=0, description="Semantic weight relative to lexical (1.0)"
    )
    title_weight: float | None = Field(
        default=None, ge=0, description="Weight of the title/alias arm"
    )
    rrf_k: float | None = Field(default=None, gt=0)
    identifier_lean: float | None = Field(
        default=None, gt=0, description="Lexical weight multiplier for identifier-like queries"
    )
    link_prior: float | None = Field(
        default=None, ge=0.0, description="Weight of the link prior (notes other notes cite)"
    )
    query_words: Literal["auto", "all", "content"] = Field(
        default="auto",
        description="Words of a query the semantic arm embeds: auto (calibrated) | all | "
        "content (stopwords dropped)",
    )
    query_feedback: Policy = Field(
        default="auto",
        description="Expand BM25 queries with the nearest passages' terms: auto (contextual "
        "models, e.g. Ollama's) | on | off",
    )
    calibrate: bool = Field(default=True, description="Calibrate after indexing when due")
    calibrate_drift: float = Field(
        default=0.2, ge=0, description="Recalibrate once this share of notes changed"
    )
    absent_quantile: float = Field(
        default=0.2,
        ge=0,
        le=1,
        description="Calibrated likely_absent: best cosine below this quantile of the vault's",
    )
    budget_tokens: int = Field(default=1200, ge=50, le=20_000)
    absent_coverage: float = Field(
        default=0.4, ge=0, le=1, description="Uncalibrated likely_absent: below this coverage"
    )
    absent_cosine: float = Field(
        default=0.7, ge=-1, le=1, description="... and below this best cosine"
    )

    files_time_limit: float = Field(
        default=5.0,
        ge=0,
        description="Seconds a search may scan the files when the database is down",
    )
    fresh_search: bool = Field(
        default=True, description="Re-index changed files before each search"
    )
    fresh_max_files: int = Field(default=200, ge=0)
    fresh_interval: float = Field(default=2.0, ge=0, description="Seconds between freshness passes")
    fresh_watch: bool = Field(
        default=True,
        description="Long-lived processes watch the vault (inotify): a freshness pass skips "
        "its walk when nothing changed, and runs before every search when something did",
    )

    # The resident service (retriever serve): CLI calls and hooks answer from a warm process.
    service: Literal["auto", "connect", "off"] = Field(
        default="auto", description="auto (start when missing) | connect (only use) | off"
    )
    service_idle: float = Field(
        default=1800.0, ge=0, description="Seconds idle before the service stops (0 = never)"
    )

    # Agent hooks (retriever hook pre-tool / post-tool); matchers are regexes on tool names.
    hook_pre_tool: bool = Field(default=True, description="PreToolUse hook on/off")
    hook_pre_tool_matcher: str = (
        r"^(Read|Edit|MultiEdit|Write|NotebookEdit|Grep|Glob|Bash|WebSearch|WebFetch)$"
    )
    hook_pre_tool_budget: int = Field(default=300, ge=0, description="Tokens of injected passages")
    hook_pre_tool_mode: str = Field(
        default="lexical", description="Search mode: tool calls give keywords (no model load)"
    )
    hook_post_tool: bool = Field(default=True, description="PostToolUse hook on/off")
    hook_post_tool_matcher: str = Field(
        default=r"^(?!mcp__retriever__)", description="Tools whose long output is compressed"
    )
    hook_compress_threshold: int = Field(
        default=12_000, ge=0, description="Compress tool output longer than this (characters)"
    )
    hook_compress_budget: int = Field(
        default=800, ge=0, description="Tokens of a compressed extract"
    )

    @field_validator("service", "query_feedback", "query_words", mode="before")
    @classmethod
    def _folded_word(cls, value: object) -> object:
        """``OFF`` and `` off `` as the client reads them (it folds case and spaces)."""
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("embed_dim", mode="before")
    @classmethod
    def _no_dim(cls, value: object) -> object:
        """An empty value (a compose override clearing it) means no expected dimension."""
        return None if isinstance(value, str) and value.strip() in ("", "none", "auto") else value

    def resolved_vault(self) -> Path:
        return request_context.absolute(self.vault).resolve()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # In the resident service each request brings its client's environment.
        return (
            init_settings,
            _ClientEnvSource(settings_cls),
            dotenv_settings,
            file_secret_settings,
        )


class _ClientEnvSource(EnvSettingsSource):
    """The environment: the requesting client's inside the service, else the process's."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        ctx = request_context.current()
        if ctx is None:
            return super()._load_env_vars()
        return {
            (k if self.case_sensitive else k.lower()): v
            for k, v in ctx.env.items()
            if v != "" or not self.env_ignore_empty
        }


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return _loaded()


def settings_from(**overrides: object) -> Settings:
    """Settings from the environment with explicit overrides (CLI flags, tests). Paths are
    made absolute against the client's folder (the service's folder is not the client's)."""
    settings = _loaded(**{k: v for k, v in overrides.items() if v is not None})
    if request_context.current() is not None:
        settings.vault = request_context.absolute(settings.vault)
        settings.home = request_context.absolute(settings.home)
    return settings


def _loaded(**values: object) -> Settings:
    """Settings, or one ConfigError line naming the variable that cannot be used."""
    try:
        return Settings(**values)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ConfigError(_config_problem(exc)) from None
    except SettingsError as exc:  # a list or dict setting that is not JSON
        raise ConfigError(_unparsed_setting(exc)) from None


def _config_problem(exc: ValidationError) -> str:
    """One line naming the variable that holds the unusable value, and why."""
    problem = exc.errors()[0]
    field = _field_of(str(problem["loc"][0])) if problem["loc"] else "?"
    name = "DATABASE_URL" if field == "database_url" else f"RETRIEVER_{field.upper()}"
    value = problem.get("input")
    plain = isinstance(value, str | int | float) and field != "database_url"  # may hold a password
    shown = f"={value!r}" if plain else ""
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"bad setting {name}{shown}: {problem['msg']}{more}"


def _unparsed_setting(exc: SettingsError) -> str:
    found = re.search(r'field "(\w+)"', str(exc))
    name = f"RETRIEVER_{found.group(1).upper()}" if found else "a RETRIEVER_ setting"
    return f'bad setting {name}: not valid JSON (a list is written ["*.md", "notes/**"])'


def _field_of(loc: str) -> str:
    """The field an error location names: the field itself, or one of its aliases."""
    for name, info in Settings.model_fields.items():
        alias = info.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
        if loc == name or loc.lower() in {str(c).lower() for c in choices if c}:
            return name
    return loc


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}

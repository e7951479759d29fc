"""Command-line flags made from the config dataclasses, so a default is written once (specdec.config)."""

from __future__ import annotations

import argparse
from dataclasses import fields

from specdec.config import SamplingConfig, Settings


def add_config_arguments(parser: argparse.ArgumentParser, config_class: type, only: tuple = (),
                         exclude: tuple = ()) -> None:
    """One --flag per setting of `config_class` (or of those named in `only`, less those in `exclude`),
    default and help from it. Nested configs (Settings.sampling) have no flag of their own."""
    for field in fields(config_class):
        if (only and field.name not in only) or field.name in exclude or "help" not in field.metadata:
            continue
        kind = {"action": argparse.BooleanOptionalAction} if isinstance(field.default, bool) else \
            {"type": type(field.default)}
        parser.add_argument(f"--{field.name.replace('_', '-')}", default=field.default, **kind,
                            help=field.metadata["help"].replace("%", "%%") + " (default %(default)s)")


def config_from_args(config_class: type, args: argparse.Namespace, **overrides):
    """The config built from the flags `add_config_arguments` made (SpecDecError on bad values)."""
    values = {f.name: getattr(args, f.name) for f in fields(config_class) if "help" in f.metadata}
    return config_class(**(values | overrides))


def add_settings_arguments(parser: argparse.ArgumentParser, exclude: tuple = ()) -> None:
    add_config_arguments(parser, Settings, exclude=exclude)
    add_config_arguments(parser, SamplingConfig, exclude=exclude)


def settings_from_args(args: argparse.Namespace, seed_offset: int = 0) -> Settings:
    sampling = config_from_args(SamplingConfig, args)
    # A flag left out (add_settings_arguments' `exclude`) keeps the setting's default.
    values = {f.name: getattr(args, f.name) for f in fields(Settings) if hasattr(args, f.name)}
    return Settings(**values | {"sampling": sampling, "seed": args.seed + seed_offset})

"""Executor helpers that need no GPU. Launching is ``df.compile(...)``
then ``artifact.launch(...)`` (artifact.py, launcher.py): libdfrt on a
CUDA GPU, the host backend otherwise."""

from __future__ import annotations

from .launch import DataflowLaunchPackage

__all__ = ["launch_package_needs_flag_reset"]


def launch_package_needs_flag_reset(package: DataflowLaunchPackage) -> bool:
    """Whether HBM flags must be zeroed before each launch: df's launch
    package says so when any comm record is an HBM send or receive."""
    if not isinstance(package, DataflowLaunchPackage):
        raise TypeError(f"expected a launch package (build_launch_package), got "
                        f"{type(package).__name__}")
    return bool(package.needs_flag_reset)

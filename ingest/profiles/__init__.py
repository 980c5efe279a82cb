"""Trace-generator profiles, one per module behind `Profile` (see docs/profiles.md for each one's source)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ingest.profiles.base import Components, Profile, ProfileOptions
from ingest.profiles.bimodal import BimodalProfile
from ingest.profiles.constant50 import Constant50Profile
from ingest.profiles.diurnal import DiurnalProfile
from ingest.profiles.facebook import FacebookProfile
from ingest.profiles.mice_elephant import MiceElephantProfile
from ingest.profiles.soundcloud import SoundcloudProfile

__all__ = ["PROFILES", "Components", "Profile", "ProfileOptions"]

#: Profile name → class, in the order of the architecture contract.
PROFILES: Mapping[str, type[Profile[Any]]] = MappingProxyType(
    {
        p.name: p
        for p in (
            SoundcloudProfile,
            FacebookProfile,
            Constant50Profile,
            BimodalProfile,
            MiceElephantProfile,
            DiurnalProfile,
        )
    }
)

"""Site profiles: each site's rules as data (node shape, GPU directive, partitions, billing).

A profile is a TOML file in this package; the code here only knows the *shape* of a rule
(a limit, a per-GPU share, a billing formula), never a site's numbers. Users change any
value per cluster with `[clusters.NAME.profile_overrides]` (deep-merged, see
`Profile.with_overrides`); values the site's documentation does not confirm are listed in `unconfirmed`.
Users add profiles of their own with `[profiles.NAME]` tables: a full profile, or
`base = "<profile>"` plus the values that differ (see `resolve_profile`).
"""

from hpcui.profiles.loading import builtin_profiles, load_profile, resolve_profile
from hpcui.profiles.model import Billing, ContainerSite, Partition, Profile, Qos

__all__ = [
    "Billing",
    "ContainerSite",
    "Partition",
    "Profile",
    "Qos",
    "builtin_profiles",
    "load_profile",
    "resolve_profile",
]

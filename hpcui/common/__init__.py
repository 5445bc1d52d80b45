"""Small standard-library-only helpers every layer may use: time, units, how
hpcui writes durations and sizes, file locks."""

"""The parameter model: the one registry of every knob (name, default, range, curve, meaning),
its groups as a control surface lays them out, modulation routes and the morphs between looks."""

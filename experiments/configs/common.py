"""What every experiment config shares."""


def is_smoke(arg: str | None) -> bool:
  """True for the ``:smoke`` argument, False for none; anything else is an error."""
  if arg not in (None, "", "smoke"):
    raise ValueError(f"unknown config argument {arg!r}; expected 'smoke' or none.")
  return arg == "smoke"

"""Log-log growth of measured costs against a bound known up to a constant."""

import numpy as np
import pytest

from jaxpapers import saddle

XS = [1.0, 10.0, 100.0, 1000.0]


@pytest.mark.parametrize("exponent", [0.0, 0.5, 1.0, -0.25])
def test_loglog_slope_recovers_a_power_law(exponent):
  values = [3.0 * x**exponent for x in XS]
  assert saddle.loglog_slope(XS, values) == pytest.approx(exponent, abs=1e-12)
  assert saddle.loglog_slope([2.0], [5.0]) is None


def test_growth_agrees_within_the_tolerance_whatever_the_constant():
  sqrt_bound = [1 + np.sqrt(x) for x in XS]
  growth = saddle.growth_against_bound(
      XS, [70.0 * b for b in sqrt_bound], sqrt_bound, tolerance=0.01)
  assert growth["agrees"] is True
  assert growth["measured_slope"] == pytest.approx(growth["predicted_slope"])
  np.testing.assert_allclose(growth["measured_relative"],
                             growth["predicted_relative"])
  assert growth["predicted_relative"][0] == 1.0
  linear = saddle.growth_against_bound(XS, XS, sqrt_bound, tolerance=0.25)
  assert linear["agrees"] is False
  assert linear["measured_slope"] == pytest.approx(1.0)


def test_no_verdict_without_a_bound_or_a_complete_measurement():
  no_bound = saddle.growth_against_bound(XS, [5, 6, 7, 8], tolerance=0.25)
  assert no_bound["agrees"] is None and no_bound["predicted_slope"] is None
  assert no_bound["predicted_relative"] is None
  assert no_bound["measured_slope"] is not None
  budget_hit = saddle.growth_against_bound(
      XS, [5, 6, 7, 8], [1, 1, 1, 1], tolerance=0.25, measured_complete=False)
  assert budget_hit["measured_slope"] is None and budget_hit["agrees"] is None
  assert budget_hit["predicted_slope"] == pytest.approx(0.0)

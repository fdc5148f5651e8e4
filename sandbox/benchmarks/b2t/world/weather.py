"""Daily weather per city: a seasonal temperature curve from latitude and altitude, persistent noise,
and conditions drawn from a wet-season model (south and summer wetter, snow only when cold).
"""

import datetime as dt
import math
import random

from sandbox.benchmarks.b2t.world.cities import CITIES, City
from sandbox.benchmarks.b2t.world.scales import Scale

ELEVATION_M = {"Kunming": 1890, "Lijiang": 2400, "Guiyang": 1100}  # high cities are cooler
WIND_DIRECTIONS = ("North", "Northeast", "East", "Southeast", "South", "Southwest", "West", "Northwest")
AIR_QUALITY = ("Excellent", "Good", "Light Pollution", "Moderate Pollution")


def _mean_temperature(city: City, day_of_year: int) -> float:
    annual = 26.0 - 0.7 * (city.latitude - 18.0) - 0.003 * ELEVATION_M.get(city.name, 0)
    amplitude = 4.0 + 0.55 * (city.latitude - 18.0)
    return annual - amplitude * math.cos(2 * math.pi * (day_of_year - 15) / 365.0)


def _rain_probability(city: City, day_of_year: int) -> float:
    summer = 0.5 - 0.5 * math.cos(2 * math.pi * (day_of_year - 15) / 365.0)  # 0 in mid-January, 1 mid-July
    south = max(0.0, min(1.0, (40.0 - city.latitude) / 20.0))
    return 0.08 + 0.25 * summer + 0.15 * south


def weather_rows(scale: Scale, seed: int) -> list[tuple]:
    """Rows of the weather table (city, date, max, min, weather, wind, air quality), city then date order."""
    start, end = dt.date.fromisoformat(scale.date_start), dt.date.fromisoformat(scale.date_end)
    rows = []
    for city in CITIES:
        rng = random.Random(f"{seed}:weather:{city.name}")
        anomaly = 0.0
        date = start
        while date <= end:
            doy = date.timetuple().tm_yday
            anomaly = 0.7 * anomaly + rng.gauss(0, 1.6)  # warm/cold spells last a few days
            mean = _mean_temperature(city, doy) + anomaly
            spread = rng.uniform(3.0, 6.0)
            high, low = round(mean + spread), round(mean - spread)
            wet = rng.random() < _rain_probability(city, doy)
            if wet and high <= 2:
                condition = rng.choice(("Light Snow", "Snow"))
            elif wet:
                condition = rng.choices(
                    ("Light Rain", "Moderate Rain", "Thunderstorm", "Heavy Rain"),
                    weights=(6, 3, 2 if high > 22 else 0, 1),
                )[0]
            else:
                condition = rng.choices(
                    ("Sunny", "Partly Cloudy", "Cloudy", "Overcast", "Fog"),
                    weights=(5, 3, 3, 2, 1 if low < 12 else 0),
                )[0]
            wind = f"{rng.choice(WIND_DIRECTIONS)} wind, level {rng.choice(('1-2', '2-3', '3-4', '4-5'))}"
            smog_risk = 0.35 if (city.latitude > 33 and (doy < 60 or doy > 320)) else 0.1
            air = (
                AIR_QUALITY[0 if rng.random() < 0.45 else 1]
                if rng.random() > smog_risk
                else rng.choice(AIR_QUALITY[2:])
            )
            rows.append((city.name, date.isoformat(), int(high), int(low), condition, wind, air))
            date += dt.timedelta(days=1)
    return rows

"""The tolerant plan reader: what it normalises, what it refuses, and that it never raises."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.benchmarks.b2t.evaluator.example import valid_plan
from sandbox.benchmarks.b2t.plan import read_plan, time_to_minutes


def test_valid_plan_round_trips_every_field():
    plan_json = valid_plan()
    result = read_plan(json.dumps(plan_json))
    assert result.ok and result.reason == ""
    plan = result.plan
    assert [d.number for d in plan.days] == [1, 2, 3]
    day1 = plan.days[0]
    assert (day1.date, day1.city, day1.weather.condition, day1.weather.max_temp) == (
        "2026-05-01",
        "Chengdu",
        "Sunny",
        26,
    )
    train, lunch = day1.activities[0], day1.activities[1]
    assert (
        train.type,
        train.mode,
        train.number,
        train.from_city,
        train.to_city,
        train.seat_class,
        train.start,
        train.end,
        train.price,
    ) == ("intercity_transport", "train", "G1", "Shanghai", "Chengdu", "Second Class Seat", 420, 690, 1600.0)
    src = plan_json[0]["activities"][1]
    assert (lunch.type, lunch.meal, lunch.name, lunch.start_time, lunch.end_time, lunch.price) == (
        "meal",
        "lunch",
        src["name"],
        "12:10",
        "13:10",
        src["price"],
    )
    assert (lunch.transport.mode, lunch.transport.duration_min, lunch.transport.distance_km) == (
        "Taxi",
        src["transport"]["duration_min"],
        src["transport"]["distance_km"],
    )
    assert lunch.description == src["description"] and lunch.tips == src["tips"]


def test_sloppy_answer_is_normalised():
    text = """<think>Let me write it.</think>
Here is your plan:
<answer>
```json
{"Plan": [
  {"Day": "1", "Date": "2026-05-01", "City": "Chengdu", "cityInformation": "Capital of Sichuan",
   "Weather": {"weatherCondition": "Sunny", "high": "26°C", "low": 15},
   "Activities": [
     {"type": "Train", "trainNumber": "g1", "from": "Shanghai", "to": "Chengdu",
      "departureTime": "7:05", "arrivalTime": "11:40", "seat": "Second Class Seat", "cost": "¥1,106"},
     {"activityType": "Lunch", "title": "Spicy House", "time": "12:20-13:20", "totalCost": 220,
      "transportation": {"mode": "metro", "durationMinutes": "25 min", "distance": "8.1 km"},},
     {"type": "Sightseeing", "name": "Museum", "startTime": "14:00", "endTime": "16:30",
      "price": 0, "localTransport": {"transportMode": "walk", "duration": 12, "km": 0.9}},
     {"type": "accommodation", "name": "Grand", "start": "20:00", "end": "20:30", "price": 980,
      "transport": "Taxi, 15 min"},
   ]},
]}
```
</answer>"""
    result = read_plan(text)
    assert result.ok, result.reason
    day = result.plan.days[0]
    assert (day.number, day.city_info, day.weather.condition, day.weather.max_temp) == (
        1,
        "Capital of Sichuan",
        "Sunny",
        26.0,
    )
    train, lunch, museum, hotel = day.activities
    assert (train.type, train.mode, train.number, train.start_time, train.price) == (
        "intercity_transport",
        "train",
        "G1",
        "07:05",
        1106.0,
    )
    assert (lunch.type, lunch.meal, lunch.name, lunch.start, lunch.end, lunch.price) == (
        "meal",
        "lunch",
        "Spicy House",
        740,
        800,
        220.0,
    )
    assert lunch.transport.mode == "Subway" and lunch.transport.duration_min == 25.0
    assert lunch.transport.distance_km == 8.1
    assert museum.type == "attraction" and museum.transport.mode == "Walking"
    assert hotel.type == "hotel" and hotel.transport.mode == "Taxi"
    assert hotel.transport.duration_min is None


def test_flight_mode_is_inferred_from_the_number():
    text = json.dumps(
        [
            {
                "activities": [
                    {
                        "type": "intercity_transport",
                        "number": "CA1721",
                        "start_time": "07:00",
                        "end_time": "08:55",
                    }
                ]
            }
        ]
    )
    assert read_plan(text).plan.days[0].activities[0].mode == "flight"


def test_already_parsed_json_is_accepted():
    assert read_plan(valid_plan()).ok
    assert read_plan({"days": valid_plan()}).ok


@pytest.mark.parametrize(
    "answer, reason",
    [
        ("", "empty"),
        ("<answer>  </answer>", "empty"),
        ("Sorry, I cannot plan this trip.", "not valid JSON"),
        ("[{'day': 1}]", "not valid JSON"),
        ("{}", "got an object"),
        ('{"plan": 3}', "got an object"),
        ("42", "got int"),
        ("[]", "empty list"),
        ('["day one"]', "day 1 must be an object, got str"),
        ('[{"day": 1, "city": "Chengdu"}]', "day 1 has no 'activities' list"),
        ('[{"day": "first", "activities": []}]', "'day' must be a day number"),
        ('[{"activities": [3]}]', "day 1 activity 1 must be an object"),
        (
            '[{"activities": [{"type": "shopping", "start_time": "10:00", "end_time": "11:00"}]}]',
            "unknown type 'shopping'",
        ),
        (
            '[{"activities": [{"type": "meal", "name": "X", "end_time": "11:00"}]}]',
            "(X) has missing or invalid start_time None",
        ),
        (
            '[{"activities": [{"type": "meal", "start_time": "10:00", "end_time": "24:30"}]}]',
            "invalid end_time '24:30'",
        ),
        (json.dumps([{"activities": []}] * 61), "61 days"),
        (json.dumps([{"activities": [{}] * 61}]), "61 activities"),
        ("[" * 100_000, "nested too deeply"),
        ("9" * 5000, "not valid JSON"),
        ("x" * 1_000_001, "too large"),
    ],
)
def test_malformed_answers_give_a_reason(answer, reason):
    result = read_plan(answer)
    assert result.plan is None and reason in result.reason, result.reason


@pytest.mark.parametrize(
    "text, minutes",
    [
        ("07:05", 425),
        ("7:05", 425),
        ("07:05:00", 425),
        ("24:00", 1440),
        ("00:00", 0),
        ("24:01", None),
        ("12:60", None),
        ("noon", None),
        (705, None),
        (None, None),
    ],
)
def test_time_parsing(text, minutes):
    assert time_to_minutes(text) == minutes


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200) | st.builds(lambda s: "<answer>[" + s + "]</answer>", st.text(max_size=80)))
def test_random_text_never_raises(text):
    result = read_plan(text)
    assert (result.plan is None) == bool(result.reason)


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=6),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "day",
                        "activities",
                        "type",
                        "start_time",
                        "end_time",
                        "name",
                        "transport",
                        "weather",
                        "time",
                        "price",
                    ]
                ),
                inner,
                max_size=5,
            )
        ),
        max_leaves=25,
    )
)
def test_random_json_never_raises(data):
    for answer in (data, json.dumps(data)):
        result = read_plan(answer)
        assert (result.plan is None) == bool(result.reason)

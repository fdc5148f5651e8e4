"""Preference vocabularies of the user profile schema (SPEC.md section 4, paper Table 9).

Every module that generates, searches or judges preference attributes uses these exact strings,
so a value written by the world generator is the value the evaluator compares against.
"""

STAR_LEVELS = (
    "2-Star & Below/Economy",
    "3-Star/Comfort",
    "4-Star/Upscale",
    "5-Star/Luxury",
    "City Homestay",
)
HOTEL_FACILITIES = (
    "Free WiFi",
    "Private Bathroom",
    "Parking",
    "Gym",
    "Swimming Pool",
    "Restaurant",
)
ATTRACTION_TYPES = (
    "Park/Square",
    "Museum/Exhibition",
    "Cultural/Historic Site",
    "Cityscape",
    "Natural Landscape",
    "Comprehensive Scenic Area",
    "Religious Site",
    "Theme Park",
    "Outdoor Adventure",
    "Water Activities",
    "Hot Spring/Wellness",
    "Rural/Folk Village",
    "Animal Watching",
    "Ice/Snow Sports",
    "Water Conservancy Facility",
)
WALKING_TOLERANCE = ("Low (1-3km)", "Medium (3-5km)", "High (5km+)")
# Upper bound of walking per day in km for each tolerance (High has none).
WALKING_LIMIT_KM = {"Low (1-3km)": 3.0, "Medium (3-5km)": 5.0, "High (5km+)": float("inf")}
CUISINES = (
    "Beverages",
    "Snacks/Fast Food",
    "Other Cuisines",
    "Hot Pot",
    "Western Food",
    "Cantonese",
    "Other Chinese Food",
    "Shanghai/Zhejiang Cuisine",
    "Sichuan Cuisine",
    "Bakery/Desserts",
    "Barbecue",
    "Buffet",
    "Northern Chinese Food",
    "Hunan Cuisine",
    "Seafood",
    "Japanese/Korean Cuisine",
    "Southeast Asian Cuisine",
)
PRICE_LEVELS = (
    "Budget (30-80 CNY/person)",
    "Moderate (80-150 CNY/person)",
    "Generous (150-300 CNY/person)",
    "Luxury (300-500 CNY/person)",
)
# Inclusive per-person average price range (CNY) of each restaurant price level.
PRICE_LEVEL_RANGE = {
    "Budget (30-80 CNY/person)": (30.0, 80.0),
    "Moderate (80-150 CNY/person)": (80.0, 150.0),
    "Generous (150-300 CNY/person)": (150.0, 300.0),
    "Luxury (300-500 CNY/person)": (300.0, 500.0),
}
DINING_ENVIRONMENTS = ("Quiet", "Scenic View", "Family-friendly", "Lively", "Unique Decor")
INTERCITY_MODES = ("High-speed Rail", "Regular Train", "Airplane", "Long-distance Bus")
INTRACITY_MODES = ("Subway", "Bus", "Taxi", "Ride-sharing", "Walking")
SEAT_CLASSES = ("Economy Class", "Business Class", "First Class Seat", "Second Class Seat")
# Which seat classes exist on which carrier kind.
FLIGHT_CABINS = ("Economy Class", "Business Class")
TRAIN_SEATS = ("Second Class Seat", "First Class Seat")

ENTERTAINMENT_TYPES = (
    "KTV",
    "Bar/Pub",
    "Live Music",
    "Theater/Show",
    "Escape Room",
    "Spa/Massage",
    "Bowling/Billiards",
    "Cinema",
)

# The five preference dimensions and their attributes (14 in all with the four history lists).
PROFILE_DIMENSIONS = {
    "history": ("accommodations", "restaurants", "attractions", "transportation"),
    "hotel": ("star_requirement", "essential_facilities"),
    "attraction": ("preferred_attraction_types", "walking_tolerance"),
    "dining": ("cuisine_preferences", "price_level", "dining_environment"),
    "transportation": ("intercity_transport", "intracity_transport", "seat_class"),
}

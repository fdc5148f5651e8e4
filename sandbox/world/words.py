"""Word lists the generator composes POI names, addresses, details and reviews from.

Kept apart from the generation logic so the logic stays readable. Every vocabulary value of
`sandbox/vocab.py` used as an attribute has an entry here (checked by tests/test_world.py).
"""

ROADS = (
    "Zhongshan", "Renmin", "Jiefang", "Heping", "Jianshe", "Wenhua", "Xinhua", "Changjiang",
    "Yan'an", "Binjiang", "Chunxi", "Huaihai", "Xingfu", "Guangming", "Minzhu", "Dongfeng",
    "Qingnian", "Shengli", "Hongqi", "Youyi", "Jinqiao", "Tianfu", "Huancheng", "Yingbin",
)
ROAD_KINDS = ("Road", "Street", "Avenue", "Middle Road", "East Road", "West Road")

BRANDS = (
    "Golden Lotus", "Old Town", "Jade Garden", "Red Lantern", "Silver Moon", "Plum Blossom",
    "Bamboo Grove", "Happy Family", "Lucky Star", "Peach Garden", "Willow Bank", "Spring Breeze",
    "Morning Dew", "Harvest", "Five Grains", "Dragon Gate", "Phoenix", "Cloud Nine", "Blue Sky",
    "Grandma's", "Uncle Wang's", "Little Sheep", "Ancient Well", "Stone Bridge", "River View",
    "Maple Leaf", "Orchid", "Osmanthus", "Lotus Pond", "Tea Horse", "Silk Road", "Lantern Street",
    "Sunrise", "Moonlight", "Evergreen", "Crane", "Pine Hill", "Camellia", "Magnolia", "Azure",
)

# cuisine -> (name words, tertiary dish styles, typical price-level weights Budget..Luxury)
CUISINE_STYLES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[int, int, int, int]]] = {
    "Beverages": (("Tea House", "Coffee", "Milk Tea", "Juice Bar"),
                  ("Coffee Shop", "Tea House", "Milk Tea", "Juice Bar"), (6, 3, 1, 0)),
    "Snacks/Fast Food": (("Noodle Bar", "Dumpling House", "Snack Shop", "Burger Joint"),
                         ("Noodles", "Dumplings", "Street Snacks", "Fast Food"), (7, 2, 1, 0)),
    "Other Cuisines": (("Halal Kitchen", "Xinjiang Restaurant", "Indian Kitchen", "Mexican Grill"),
                       ("Halal", "Xinjiang Cuisine", "Indian", "Middle Eastern"), (3, 4, 2, 1)),
    "Hot Pot": (("Hot Pot", "Hot Pot House", "Hot Pot Garden"),
                ("Chongqing Hot Pot", "Beef Hot Pot", "Mushroom Hot Pot", "Chaoshan Beef Hot Pot"), (2, 5, 3, 1)),
    "Western Food": (("Steakhouse", "Bistro", "Trattoria", "Brasserie"),
                     ("Steak", "Italian", "French", "Pizza & Pasta"), (1, 3, 4, 2)),
    "Cantonese": (("Dim Sum House", "Cantonese Restaurant", "Roast Goose House"),
                  ("Dim Sum", "Cantonese Roast Meats", "Chaozhou Cuisine", "Claypot Rice"), (2, 4, 3, 2)),
    "Other Chinese Food": (("Home Kitchen", "Family Restaurant", "Noodle Kitchen"),
                           ("Home-style Cooking", "Fujian Cuisine", "Hakka Cuisine", "Yunnan Cuisine"), (4, 4, 2, 1)),
    "Shanghai/Zhejiang Cuisine": (("Jiangnan Kitchen", "Hangzhou House", "Benbang Restaurant"),
                                  ("Benbang Cuisine", "Hangzhou Cuisine", "Ningbo Cuisine", "Huaiyang Cuisine"), (2, 4, 3, 2)),
    "Sichuan Cuisine": (("Sichuan Kitchen", "Spicy House", "Mala Restaurant"),
                        ("Sichuan Home-style", "Fish in Chili Oil", "Skewers (Chuanchuan)", "Mapo Tofu"), (4, 4, 2, 1)),
    "Bakery/Desserts": (("Bakery", "Dessert House", "Patisserie"),
                        ("Bakery", "Cakes", "Ice Cream", "Traditional Pastries"), (6, 3, 1, 0)),
    "Barbecue": (("BBQ", "Grill House", "Skewer Bar"),
                 ("Chinese Skewers", "Korean BBQ", "Lamb Barbecue", "Grilled Fish"), (4, 4, 2, 0)),
    "Buffet": (("Buffet", "World Buffet"),
               ("International Buffet", "Seafood Buffet", "Hot Pot Buffet", "Barbecue Buffet"), (1, 3, 4, 2)),
    "Northern Chinese Food": (("Dumpling Hall", "Roast Duck Restaurant", "Northeast Kitchen"),
                              ("Peking Duck", "Dumplings", "Northeastern Cuisine", "Shaanxi Noodles"), (4, 4, 2, 1)),
    "Hunan Cuisine": (("Hunan Kitchen", "Xiang Restaurant"),
                      ("Hunan Home-style", "Chopped Chili Fish Head", "Stinky Tofu", "Spicy Crayfish"), (4, 4, 2, 0)),
    "Seafood": (("Seafood House", "Fisherman's Wharf", "Oyster Bar"),
                ("Live Seafood", "Seafood Stir-fry", "Crab", "Seafood Porridge"), (1, 3, 4, 3)),
    "Japanese/Korean Cuisine": (("Sushi Bar", "Izakaya", "Korean Kitchen", "Ramen House"),
                                ("Sushi", "Ramen", "Korean BBQ", "Izakaya"), (2, 4, 3, 2)),
    "Southeast Asian Cuisine": (("Thai Kitchen", "Pho House", "Malaysian Cafe"),
                                ("Thai", "Vietnamese", "Malaysian", "Singaporean"), (2, 5, 3, 1)),
}

# (open, close, weight): most cover lunch and dinner, some breakfast, a few round the clock.
RESTAURANT_HOURS = (
    ("06:30", "21:00", 3), ("07:00", "22:00", 4), ("07:30", "14:30", 1), ("10:00", "22:00", 6),
    ("11:00", "21:30", 5), ("11:00", "23:00", 3), ("16:30", "24:00", 1), ("00:00", "24:00", 2),
)
CAFE_HOURS = (("07:30", "22:00", 4), ("08:00", "21:00", 3), ("10:00", "22:30", 2), ("00:00", "24:00", 1))

ENVIRONMENT_PHRASES = {
    "Quiet": "a quiet dining room",
    "Scenic View": "window seats with a scenic view",
    "Family-friendly": "high chairs and a family-friendly menu",
    "Lively": "a lively, bustling atmosphere",
    "Unique Decor": "unique themed decor",
}

# star level -> (name patterns, tertiary categories, nightly price range, facility probabilities
#               in vocab.HOTEL_FACILITIES order, room types (name, price factor, capacity))
HOTEL_STYLES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[int, int], tuple[float, ...],
                              tuple[tuple[str, float, int], ...]]] = {
    "2-Star & Below/Economy": (("{b} Express Inn", "{b} Budget Hotel", "{b} Inn"), ("Chain Hotel", "Budget Hotel"),
                               (120, 280), (0.95, 0.85, 0.5, 0.05, 0.02, 0.2),
                               (("Standard Queen Room", 1.0, 2), ("Standard Twin Room", 1.05, 2), ("Family Room", 1.5, 3))),
    "3-Star/Comfort": (("{b} Hotel", "{b} Business Hotel", "{b} Garden Hotel"), ("Business Hotel", "Boutique Hotel"),
                       (250, 480), (0.97, 0.97, 0.7, 0.3, 0.1, 0.55),
                       (("Superior King Room", 1.0, 2), ("Superior Twin Room", 1.0, 2), ("Family Suite", 1.6, 4))),
    "4-Star/Upscale": (("{b} Grand Hotel", "{b} Plaza Hotel", "{b} International Hotel"),
                       ("Business Hotel", "Boutique Hotel", "Resort"),
                       (450, 900), (0.98, 0.99, 0.9, 0.75, 0.45, 0.9),
                       (("Deluxe King Room", 1.0, 2), ("Deluxe Twin Room", 1.0, 2), ("Executive Suite", 2.0, 3))),
    "5-Star/Luxury": (("{b} Palace Hotel", "The {b} Luxury Hotel", "{b} Grand Resort"), ("Luxury Hotel", "Resort"),
                      (900, 2800), (1.0, 1.0, 0.95, 0.95, 0.8, 1.0),
                      (("Grand Deluxe King Room", 1.0, 2), ("Grand Deluxe Twin Room", 1.0, 2),
                       ("Presidential Suite", 3.5, 4))),
    "City Homestay": (("{b} Courtyard Homestay", "{b} Guesthouse", "{b} Loft Apartment"),
                      ("Homestay", "Guesthouse", "Serviced Apartment"),
                      (180, 650), (0.95, 0.8, 0.4, 0.05, 0.1, 0.25),
                      (("Cozy Double Room", 1.0, 2), ("Loft Twin Room", 1.1, 2), ("Whole Apartment", 1.9, 4))),
}
HOTEL_STAR_WEIGHTS = {"2-Star & Below/Economy": 25, "3-Star/Comfort": 25, "4-Star/Upscale": 22,
                      "5-Star/Luxury": 13, "City Homestay": 15}

PLACE_WORDS = (
    "Jade Spring", "Cloud Peak", "Lotus", "Phoenix", "Dragon Pool", "Willow", "Red Cliff",
    "Plum Blossom", "White Crane", "Moon Lake", "White Pagoda", "Golden Sand", "Purple Bamboo",
    "Green Hill", "Mirror Lake", "Pearl", "Twin Dragon", "Rainbow", "Peony", "Camphor",
    "Eastern Sun", "Silver Stream", "Autumn Moon", "Black Dragon", "Nine Bends", "Hundred Flowers",
    "Seven Stars", "Unicorn", "Swallow", "Heron Island",
)

# attraction type -> (name suffixes, custom types, walking km range, duration min range,
#                     ticket price range (low == 0 means often free), hours options, best season)
ATTRACTION_STYLES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[float, float], tuple[int, int],
                                   tuple[int, int], tuple[tuple[str, str], ...], str]] = {
    "Park/Square": (("Park", "Square", "Garden", "Riverside Park"), ("Urban Park", "City Square", "Botanical Garden"),
                    (1.5, 4.0), (60, 150), (0, 20), (("06:00", "22:00"), ("00:00", "24:00")), "All year"),
    "Museum/Exhibition": (("Museum", "Art Museum", "Exhibition Hall", "Science Museum"),
                          ("History Museum", "Art Gallery", "Science Center"),
                          (1.0, 2.5), (90, 180), (0, 80), (("09:00", "17:00"), ("09:30", "17:30")), "All year"),
    "Cultural/Historic Site": (("Ancient Town", "Old Street", "Former Residence", "Memorial Hall", "City Gate"),
                               ("Historic Architecture", "Ancient Town", "Memorial Site"),
                               (1.5, 4.5), (90, 180), (20, 120), (("08:30", "17:30"), ("08:00", "18:00")),
                               "Spring, Autumn"),
    "Cityscape": (("Observation Deck", "Tower", "Pedestrian Street", "Riverside Promenade", "Night Market"),
                  ("Skyline View", "Night View", "Shopping Street"),
                  (1.0, 3.0), (60, 150), (0, 220), (("09:00", "21:00"), ("10:00", "22:00")), "All year"),
    "Natural Landscape": (("Mountain", "Gorge", "Waterfall", "Forest Park", "Lake"),
                          ("Mountain Scenery", "Karst Landscape", "Lake Scenery"),
                          (4.0, 9.0), (150, 240), (40, 200), (("07:30", "17:30"), ("08:00", "18:00")),
                          "Spring, Autumn"),
    "Comprehensive Scenic Area": (("Scenic Area", "Cultural Tourism Zone", "Resort Scenic Area"),
                                  ("5A Scenic Area", "Leisure Resort", "Cultural Park"),
                                  (3.0, 7.0), (150, 240), (50, 180), (("08:00", "18:00"), ("08:30", "21:00")),
                                  "Spring, Autumn"),
    "Religious Site": (("Temple", "Monastery", "Taoist Temple", "Pagoda"), ("Buddhist Temple", "Taoist Temple"),
                       (1.0, 2.5), (60, 120), (0, 50), (("07:00", "17:00"), ("08:00", "17:30")), "All year"),
    "Theme Park": (("Theme Park", "Amusement Park", "Adventure World"), ("Amusement Park", "Cultural Theme Park"),
                   (4.0, 8.0), (180, 240), (150, 450), (("09:30", "20:00"), ("10:00", "21:00")), "All year"),
    "Outdoor Adventure": (("Climbing Base", "Zipline Park", "Hiking Trail", "Rafting Base"),
                          ("Hiking", "Rafting", "Rock Climbing"),
                          (5.0, 10.0), (120, 240), (60, 260), (("08:00", "18:00"), ("08:30", "17:30")),
                          "Spring, Summer, Autumn"),
    "Water Activities": (("Water Park", "Marina", "Beach", "Boat Tour Pier"), ("Water Park", "Boat Tour", "Beach"),
                         (1.0, 3.0), (120, 240), (0, 220), (("09:00", "19:00"), ("10:00", "21:00")), "Summer"),
    "Hot Spring/Wellness": (("Hot Spring Resort", "Spa Valley", "Wellness Retreat"), ("Hot Spring", "Wellness Spa"),
                            (0.5, 1.5), (120, 240), (120, 360), (("10:00", "22:00"), ("09:00", "23:00")),
                            "Autumn, Winter"),
    "Rural/Folk Village": (("Folk Village", "Ancient Village", "Ethnic Culture Park", "Tea Garden"),
                           ("Folk Village", "Farm Stay", "Tea Plantation"),
                           (2.0, 4.5), (120, 210), (0, 80), (("08:00", "18:00"), ("08:30", "17:30")),
                           "Spring, Autumn"),
    "Animal Watching": (("Zoo", "Aquarium", "Wildlife Park", "Panda Base", "Bird Sanctuary"),
                        ("Zoo", "Aquarium", "Wildlife Reserve"),
                        (2.0, 5.0), (120, 240), (40, 300), (("08:00", "17:30"), ("09:00", "18:00")), "All year"),
    "Ice/Snow Sports": (("Ski Resort", "Ice Rink", "Snow World"), ("Indoor Ski Hall", "Ice Rink", "Ski Resort"),
                        (1.0, 3.0), (120, 240), (100, 400), (("09:00", "21:00"), ("10:00", "22:00")), "Winter"),
    "Water Conservancy Facility": (("Dam", "Reservoir", "Water Conservancy Museum", "Sluice Park"),
                                   ("Dam", "Reservoir", "Irrigation Heritage"),
                                   (2.0, 4.0), (60, 150), (0, 60), (("08:00", "18:00"), ("08:30", "17:30")),
                                   "Spring, Summer, Autumn"),
}

# entertainment type -> (name patterns, price range, hours options)
ENTERTAINMENT_STYLES: dict[str, tuple[tuple[str, ...], tuple[int, int], tuple[tuple[str, str], ...]]] = {
    "KTV": (("{b} KTV", "{b} Party KTV"), (60, 200), (("12:00", "24:00"), ("00:00", "24:00"))),
    "Bar/Pub": (("{b} Bar", "{b} Pub", "{b} Brewhouse"), (80, 250), (("18:00", "24:00"), ("17:00", "24:00"))),
    "Live Music": (("{b} Livehouse", "{b} Jazz Club"), (100, 300), (("19:00", "24:00"), ("18:30", "23:30"))),
    "Theater/Show": (("{b} Theater", "{b} Grand Theatre", "{b} Crosstalk Club"), (120, 480),
                     (("10:00", "22:00"), ("13:00", "22:30"))),
    "Escape Room": (("{b} Escape Room", "{b} Mystery Room"), (90, 200), (("10:00", "23:00"), ("11:00", "24:00"))),
    "Spa/Massage": (("{b} Foot Spa", "{b} Massage Center", "{b} Spa"), (120, 380),
                    (("11:00", "24:00"), ("10:00", "23:00"))),
    "Bowling/Billiards": (("{b} Bowling Center", "{b} Billiards Club"), (40, 120),
                          (("10:00", "24:00"), ("12:00", "24:00"))),
    "Cinema": (("{b} Cinema", "{b} IMAX Cinema"), (40, 90), (("09:00", "24:00"), ("09:30", "23:30"))),
}

REVIEWS = {
    "restaurant": (
        "Authentic flavors, will come again.", "Generous portions and fair prices.", "Service was quick and friendly.",
        "A bit crowded at peak hours.", "The signature dish is a must-try.", "Clean, comfortable dining room.",
        "Great for gatherings with friends.", "Queue was long but worth it.", "Fresh ingredients, light seasoning.",
        "Staff recommended excellent dishes.",
    ),
    "hotel": (
        "Clean room and comfortable bed.", "Convenient location near the metro.", "Friendly front desk staff.",
        "Breakfast had plenty of choices.", "Quiet at night, slept well.", "Good value for the price.",
        "Room was smaller than expected.", "Check-in was fast and smooth.", "Great view from the upper floors.",
    ),
    "attraction": (
        "Beautiful scenery, great for photos.", "Worth a half-day visit.", "Go early to avoid the crowds.",
        "Well organised with clear signs.", "The guide's stories were fascinating.", "Kids loved it.",
        "Wear comfortable shoes.", "Best visited on a clear day.", "Rich history, very educational.",
    ),
}

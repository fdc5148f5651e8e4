"""SQLite schema of the travel world store (SPEC.md section 2, paper Table 6).

One table per record kind. List-valued fields (facilities, reviews, seat fares, room information,
ticket information) are JSON text. Times are "HH:MM" strings, dates "YYYY-MM-DD", prices CNY.
The generator, the user-data loader, the tools, the evaluator and the instance generator all use
this one definition; `sandbox/benchmarks/b2t/README.md` documents it for users bringing their own data.
"""

SCHEMA_VERSION = 1

TABLES: dict[str, str] = {
    "cities": """
        CREATE TABLE cities (
            name TEXT PRIMARY KEY,          -- English name, e.g. "Beijing"
            name_zh TEXT NOT NULL,          -- e.g. "北京"
            province TEXT NOT NULL,
            latitude REAL NOT NULL,
            longitude REAL NOT NULL,
            description TEXT NOT NULL,      -- short city information for plans
            airports TEXT NOT NULL,         -- JSON [{"name":..., "code":...}]
            stations TEXT NOT NULL          -- JSON [station names]
        )""",
    "restaurants": """
        CREATE TABLE restaurants (
            id TEXT PRIMARY KEY,            -- "R-<city>-<n>"
            name TEXT NOT NULL,
            details TEXT NOT NULL,
            address TEXT NOT NULL,
            phone TEXT NOT NULL,
            province TEXT NOT NULL,
            city TEXT NOT NULL,
            location TEXT NOT NULL,         -- district / area name
            longitude REAL NOT NULL,
            latitude REAL NOT NULL,
            primary_category TEXT NOT NULL,   -- "Food"
            secondary_category TEXT NOT NULL, -- cuisine, one of vocab.CUISINES
            tertiary_category TEXT NOT NULL,  -- finer dish style
            business_hours TEXT NOT NULL,   -- "HH:MM-HH:MM" (end may be "24:00")
            open_time TEXT NOT NULL,        -- parsed business hours, "HH:MM"
            close_time TEXT NOT NULL,       -- "HH:MM", "24:00" allowed
            rating_rank INTEGER NOT NULL,   -- rank within the city (1 = best)
            parking TEXT NOT NULL,
            avg_price REAL NOT NULL,        -- CNY per person
            price_level TEXT NOT NULL,      -- one of vocab.PRICE_LEVELS, derived from avg_price
            environment TEXT NOT NULL,      -- JSON list, values of vocab.DINING_ENVIRONMENTS
            avg_rating REAL NOT NULL,       -- 1.0 .. 5.0
            reviews TEXT NOT NULL           -- JSON list of short strings
        )""",
    "hotels": """
        CREATE TABLE hotels (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            details TEXT NOT NULL,
            cover_image TEXT NOT NULL,
            address TEXT NOT NULL,
            phone TEXT NOT NULL,
            province TEXT NOT NULL,
            city TEXT NOT NULL,
            district TEXT NOT NULL,
            longitude REAL NOT NULL,
            latitude REAL NOT NULL,
            primary_category TEXT NOT NULL,   -- "Hotel"
            secondary_category TEXT NOT NULL, -- star level, one of vocab.STAR_LEVELS
            tertiary_category TEXT NOT NULL,  -- e.g. "Business Hotel", "Resort"
            business_hours TEXT NOT NULL,     -- reception, usually "00:00-24:00"
            rating_rank INTEGER NOT NULL,
            parking TEXT NOT NULL,
            wifi INTEGER NOT NULL,            -- 0/1
            facilities TEXT NOT NULL,         -- JSON list, values of vocab.HOTEL_FACILITIES
            avg_price REAL NOT NULL,          -- CNY per room per night
            avg_rating REAL NOT NULL,
            reviews TEXT NOT NULL,
            room_info TEXT NOT NULL           -- JSON [{"room_type":..., "price":..., "capacity":...}]
        )""",
    "entertainment": """
        CREATE TABLE entertainment (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            details TEXT NOT NULL,
            cover_image TEXT NOT NULL,
            address TEXT NOT NULL,
            phone TEXT NOT NULL,
            province TEXT NOT NULL,
            city TEXT NOT NULL,
            district TEXT NOT NULL,
            longitude REAL NOT NULL,
            latitude REAL NOT NULL,
            categories TEXT NOT NULL,        -- one of vocab.ENTERTAINMENT_TYPES
            business_hours TEXT NOT NULL,
            open_time TEXT NOT NULL,
            close_time TEXT NOT NULL,
            rating_rank INTEGER NOT NULL,
            avg_price REAL NOT NULL,         -- CNY per person
            avg_rating REAL NOT NULL
        )""",
    "attractions": """
        CREATE TABLE attractions (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            details TEXT NOT NULL,
            cover_image TEXT NOT NULL,
            address TEXT NOT NULL,
            phone TEXT NOT NULL,
            province TEXT NOT NULL,
            city TEXT NOT NULL,
            location TEXT NOT NULL,
            longitude REAL NOT NULL,
            latitude REAL NOT NULL,
            category_name TEXT NOT NULL,       -- "Attraction"
            attraction_type TEXT NOT NULL,     -- one of vocab.ATTRACTION_TYPES
            custom_type TEXT NOT NULL,         -- free-form finer type
            opening_hours TEXT NOT NULL,       -- "HH:MM-HH:MM"
            open_time TEXT NOT NULL,
            close_time TEXT NOT NULL,
            best_season TEXT NOT NULL,
            recommended_duration_min INTEGER NOT NULL,
            walking_km REAL NOT NULL,          -- walking a typical visit involves
            avg_price REAL NOT NULL,           -- ticket CNY per person (0 = free)
            avg_rating REAL NOT NULL,
            reviews TEXT NOT NULL,
            ticket_info TEXT NOT NULL          -- JSON [{"ticket":..., "price":...}]
        )""",
    "flights": """
        CREATE TABLE flights (
            id INTEGER PRIMARY KEY,
            flight_number TEXT NOT NULL,
            airline TEXT NOT NULL,
            airline_code TEXT NOT NULL,
            origin_city TEXT NOT NULL,
            origin_city_code TEXT NOT NULL,
            destination_city TEXT NOT NULL,
            destination_city_code TEXT NOT NULL,
            origin_airport TEXT NOT NULL,
            origin_airport_code TEXT NOT NULL,
            destination_airport TEXT NOT NULL,
            destination_airport_code TEXT NOT NULL,
            departure_date TEXT NOT NULL,
            departure_time TEXT NOT NULL,
            arrival_date TEXT NOT NULL,
            arrival_time TEXT NOT NULL,
            duration_min INTEGER NOT NULL,
            departure_terminal TEXT NOT NULL,
            arrival_terminal TEXT NOT NULL,
            aircraft TEXT NOT NULL,
            cabin_class TEXT NOT NULL,       -- "Economy Class" | "Business Class"
            cabin_code TEXT NOT NULL,
            adult_fare REAL NOT NULL,
            child_fare REAL NOT NULL,
            fuel_surcharge REAL NOT NULL,
            airport_fee REAL NOT NULL,
            total_price REAL NOT NULL,       -- per adult, fare + fees
            discount REAL NOT NULL,
            on_time_rate REAL NOT NULL,
            meal INTEGER NOT NULL,
            codeshare TEXT NOT NULL
        )""",
    "trains": """
        CREATE TABLE trains (
            id INTEGER PRIMARY KEY,
            train_number TEXT NOT NULL,      -- "G123" high-speed, "K456"/"T78"/"Z9" regular
            train_type TEXT NOT NULL,        -- "High-speed Rail" | "Regular Train"
            origin_city TEXT NOT NULL,
            origin_station TEXT NOT NULL,
            destination_city TEXT NOT NULL,
            destination_station TEXT NOT NULL,
            departure_time TEXT NOT NULL,    -- runs daily
            arrival_time TEXT NOT NULL,
            arrival_day_offset INTEGER NOT NULL,  -- 0 same day, 1 next day
            duration_text TEXT NOT NULL,
            duration_min INTEGER NOT NULL,
            fares TEXT NOT NULL              -- JSON {"Second Class Seat": 553.0, "First Class Seat": ...}
        )""",
    "weather": """
        CREATE TABLE weather (
            city TEXT NOT NULL,
            date TEXT NOT NULL,
            max_temp INTEGER NOT NULL,
            min_temp INTEGER NOT NULL,
            weather TEXT NOT NULL,
            wind TEXT NOT NULL,
            air_quality TEXT NOT NULL,
            PRIMARY KEY (city, date)
        )""",
    "meta": """
        CREATE TABLE meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL              -- schema_version, seed, scale, date_start, date_end
        )""",
}

INDEXES: tuple[str, ...] = (
    "CREATE INDEX idx_restaurants_city ON restaurants(city, secondary_category)",
    "CREATE INDEX idx_restaurants_name ON restaurants(city, name)",
    "CREATE INDEX idx_hotels_city ON hotels(city, secondary_category)",
    "CREATE INDEX idx_hotels_name ON hotels(city, name)",
    "CREATE INDEX idx_entertainment_city ON entertainment(city, categories)",
    "CREATE INDEX idx_entertainment_name ON entertainment(city, name)",
    "CREATE INDEX idx_attractions_city ON attractions(city, attraction_type)",
    "CREATE INDEX idx_attractions_name ON attractions(city, name)",
    "CREATE INDEX idx_flights_route ON flights(origin_city, destination_city, departure_date)",
    "CREATE INDEX idx_flights_number ON flights(flight_number, departure_date)",
    "CREATE INDEX idx_trains_route ON trains(origin_city, destination_city)",
    "CREATE INDEX idx_trains_number ON trains(train_number)",
)

# POI tables (things a plan visits by name) and their kind name in plans/trajectories.
POI_TABLES = {
    "restaurant": "restaurants",
    "hotel": "hotels",
    "attraction": "attractions",
    "entertainment": "entertainment",
}

"""Schema families of the procedural generator: six domains over one relational shape.

* :class:`Domain` - the vocabulary of one domain: table and column names, the nouns a request
  uses for them, category and status values, and the phrases its ambiguity families use.
* :data:`DOMAINS` - retail, library, hospital, sports league, university, flights.
* :data:`TRAIN_DOMAINS`, :data:`TEST_DOMAINS` - the default split: train on four schema
  families, evaluate on two that training never saw.

Every domain has the same shape - people (an *entity* table), things (an *item* table) and
events linking them (an *event* table with foreign keys to both) - so every ambiguity family
applies to every domain, while the names, values and phrasing differ.
"""

from __future__ import annotations

from dataclasses import dataclass

from ambitab_gym.errors import ConfigurationError

__all__ = ["DOMAINS", "TEST_DOMAINS", "TRAIN_DOMAINS", "Domain", "resolve_domains"]


@dataclass(frozen=True)
class Domain:
    """The vocabulary of one schema family.

    Example:
        >>> d = DOMAINS["retail"]
        >>> d.entity_table, d.event_table, d.measure_term, d.measure_columns
        ('customers', 'orders', 'order value', ('total', 'amount'))
    """

    name: str
    # people
    entity_table: str
    entity_id: str
    entity_plural: str
    city_column: str
    tier_column: str
    tier_values: tuple[str, str, str]
    joined_column: str
    # things
    item_table: str
    item_id: str
    item_plural: str
    item_name_parts: tuple[tuple[str, ...], tuple[str, ...]]
    category_column: str
    category_values: tuple[str, ...]
    category_plural: str
    item_value_column: str
    item_value_range: tuple[float, float]
    item_value_phrase: str
    item_knowledge_term: str
    # events
    event_table: str
    event_id: str
    event_singular: str
    event_plural: str
    date_column: str
    measure_columns: tuple[str, str]
    measure_term: str
    measure_meaning: str
    measure_range: tuple[float, float]
    size_column: str
    size_phrase: str
    size_unit: str
    size_range: tuple[int, int]
    large_term: str
    status_column: str
    status_values: tuple[str, ...]
    entity_knowledge_term: str
    top_term: str
    item_knowledge_op: str = ">="

    @property
    def database_prefix(self) -> str:
        return self.name

    @property
    def archive_table(self) -> str:
        """The table of archived events (2019-2021), shaped like :attr:`event_table`."""
        return f"{self.event_table}_archive"


DOMAINS: dict[str, Domain] = {
    d.name: d
    for d in (
        Domain(
            name="retail",
            entity_table="customers",
            entity_id="customer_id",
            entity_plural="customers",
            city_column="city",
            tier_column="loyalty_tier",
            tier_values=("gold", "silver", "bronze"),
            joined_column="signup_year",
            item_table="products",
            item_id="product_id",
            item_plural="products",
            item_name_parts=(
                ("Classic", "Compact", "Deluxe", "Smart", "Bamboo", "Steel", "Wireless", "Eco"),
                ("Kettle", "Blender", "Lamp", "Speaker", "Backpack", "Skillet", "Heater", "Fan"),
            ),
            category_column="category",
            category_values=("Kitchen", "Garden", "Electronics", "Home", "Toys"),
            category_plural="categories",
            item_value_column="unit_price",
            item_value_range=(8.0, 400.0),
            item_value_phrase="unit price",
            item_knowledge_term="premium products",
            event_table="orders",
            event_id="order_id",
            event_singular="order",
            event_plural="orders",
            date_column="order_date",
            measure_columns=("total", "amount"),
            measure_term="order value",
            measure_meaning="Value of the order in euros.",
            measure_range=(10.0, 600.0),
            size_column="quantity",
            size_phrase="quantity",
            size_unit="items",
            size_range=(1, 12),
            large_term="large orders",
            status_column="status",
            status_values=("delivered", "shipped", "cancelled", "returned"),
            entity_knowledge_term="loyal customers",
            top_term="top customers",
        ),
        Domain(
            name="library",
            entity_table="members",
            entity_id="member_id",
            entity_plural="members",
            city_column="branch_city",
            tier_column="membership_type",
            tier_values=("premium", "standard", "student"),
            joined_column="join_year",
            item_table="books",
            item_id="book_id",
            item_plural="books",
            item_name_parts=(
                ("Silent", "Hidden", "Broken", "Golden", "Winter", "Distant", "Crimson", "Last"),
                ("Harbor", "Garden", "Empire", "Letters", "River", "Orchard", "Voyage", "Clock"),
            ),
            category_column="genre",
            category_values=("Mystery", "Fantasy", "History", "Poetry", "Science"),
            category_plural="genres",
            item_value_column="replacement_cost",
            item_value_range=(5.0, 120.0),
            item_value_phrase="replacement cost",
            item_knowledge_term="rare books",
            event_table="loans",
            event_id="loan_id",
            event_singular="loan",
            event_plural="loans",
            date_column="loan_date",
            measure_columns=("late_fee", "fine"),
            measure_term="late fees",
            measure_meaning="Money charged for returning the book late, in euros.",
            measure_range=(0.5, 30.0),
            size_column="loan_days",
            size_phrase="loan days",
            size_unit="days",
            size_range=(3, 60),
            large_term="long loans",
            status_column="status",
            status_values=("returned", "overdue", "lost", "renewed"),
            entity_knowledge_term="avid readers",
            top_term="top members",
        ),
        Domain(
            name="hospital",
            entity_table="patients",
            entity_id="patient_id",
            entity_plural="patients",
            city_column="city",
            tier_column="insurance_plan",
            tier_values=("basic", "plus", "premium"),
            joined_column="registration_year",
            item_table="doctors",
            item_id="doctor_id",
            item_plural="doctors",
            item_name_parts=(
                (
                    "Dr. Adams",
                    "Dr. Baker",
                    "Dr. Chen",
                    "Dr. Diaz",
                    "Dr. Evans",
                    "Dr. Fischer",
                    "Dr. Gupta",
                    "Dr. Haddad",
                ),
                ("Jr.", "Sr.", "MD", "PhD", "DO", "FRCP", "MBBS", "MPH"),
            ),
            category_column="specialty",
            category_values=("Cardiology", "Neurology", "Pediatrics", "Oncology", "Radiology"),
            category_plural="specialties",
            item_value_column="years_experience",
            item_value_range=(1.0, 40.0),
            item_value_phrase="years of experience",
            item_knowledge_term="senior doctors",
            event_table="visits",
            event_id="visit_id",
            event_singular="visit",
            event_plural="visits",
            date_column="visit_date",
            measure_columns=("total_charge", "billed_amount"),
            measure_term="visit cost",
            measure_meaning="What the visit cost, in dollars.",
            measure_range=(40.0, 2500.0),
            size_column="duration_minutes",
            size_phrase="visit minutes",
            size_unit="minutes",
            size_range=(10, 240),
            large_term="long visits",
            status_column="status",
            status_values=("completed", "cancelled", "referred", "rescheduled"),
            entity_knowledge_term="frequent patients",
            top_term="top patients",
        ),
        Domain(
            name="sports",
            entity_table="players",
            entity_id="player_id",
            entity_plural="players",
            city_column="hometown",
            tier_column="position",
            tier_values=("forward", "midfielder", "defender"),
            joined_column="debut_year",
            item_table="teams",
            item_id="team_id",
            item_plural="teams",
            item_name_parts=(
                (
                    "Northfield",
                    "Riverside",
                    "Lakeview",
                    "Hillcrest",
                    "Bayside",
                    "Oakridge",
                    "Westbrook",
                    "Stonegate",
                ),
                (
                    "Rovers",
                    "United",
                    "Athletic",
                    "Wanderers",
                    "Rangers",
                    "Falcons",
                    "Tigers",
                    "Comets",
                ),
            ),
            category_column="division",
            category_values=("North", "South", "East", "West", "Central"),
            category_plural="divisions",
            item_value_column="founded_year",
            item_value_range=(1880.0, 2015.0),
            item_value_phrase="founding year",
            item_knowledge_term="historic teams",
            item_knowledge_op="<=",
            event_table="appearances",
            event_id="appearance_id",
            event_singular="appearance",
            event_plural="appearances",
            date_column="match_date",
            measure_columns=("points", "score"),
            measure_term="points",
            measure_meaning="Points the player earned in the match.",
            measure_range=(0.0, 40.0),
            size_column="minutes_played",
            size_phrase="minutes played",
            size_unit="minutes",
            size_range=(5, 90),
            large_term="long appearances",
            status_column="role",
            status_values=("starter", "substitute", "captain", "injured"),
            entity_knowledge_term="regular players",
            top_term="top players",
        ),
        Domain(
            name="university",
            entity_table="students",
            entity_id="student_id",
            entity_plural="students",
            city_column="home_city",
            tier_column="programme",
            tier_values=("undergraduate", "masters", "doctoral"),
            joined_column="enrollment_year",
            item_table="courses",
            item_id="course_id",
            item_plural="courses",
            item_name_parts=(
                (
                    "Applied",
                    "Modern",
                    "Advanced",
                    "Introductory",
                    "Comparative",
                    "Computational",
                    "Global",
                    "Quantitative",
                ),
                (
                    "Statistics",
                    "Chemistry",
                    "Economics",
                    "Linguistics",
                    "Ethics",
                    "Geology",
                    "Algebra",
                    "Robotics",
                ),
            ),
            category_column="department",
            category_values=("Sciences", "Humanities", "Engineering", "Business", "Arts"),
            category_plural="departments",
            item_value_column="course_level",
            item_value_range=(100.0, 499.0),
            item_value_phrase="course level",
            item_knowledge_term="advanced courses",
            event_table="exams",
            event_id="exam_id",
            event_singular="exam",
            event_plural="exams",
            date_column="exam_date",
            measure_columns=("mark", "score"),
            measure_term="marks",
            measure_meaning="The grade awarded for the exam, out of 100.",
            measure_range=(20.0, 100.0),
            size_column="duration_minutes",
            size_phrase="exam minutes",
            size_unit="minutes",
            size_range=(30, 240),
            large_term="long exams",
            status_column="outcome",
            status_values=("passed", "failed", "deferred", "withdrawn"),
            entity_knowledge_term="committed students",
            top_term="top students",
        ),
        Domain(
            name="flights",
            entity_table="passengers",
            entity_id="passenger_id",
            entity_plural="passengers",
            city_column="home_city",
            tier_column="frequent_flyer_level",
            tier_values=("platinum", "gold", "basic"),
            joined_column="member_since",
            item_table="flights",
            item_id="flight_id",
            item_plural="flights",
            item_name_parts=(
                ("AX", "BL", "CQ", "DN", "EV", "FJ", "GW", "HK"),
                ("101", "214", "330", "457", "512", "689", "740", "905"),
            ),
            category_column="airline",
            category_values=("Aerolux", "Skyway", "Northjet", "Coastair", "Meridian"),
            category_plural="airlines",
            item_value_column="distance_km",
            item_value_range=(200.0, 12000.0),
            item_value_phrase="distance in kilometres",
            item_knowledge_term="long-haul flights",
            event_table="bookings",
            event_id="booking_id",
            event_singular="booking",
            event_plural="bookings",
            date_column="booking_date",
            measure_columns=("fare", "ticket_price"),
            measure_term="ticket cost",
            measure_meaning="What the passenger paid for the ticket, in euros.",
            measure_range=(40.0, 1800.0),
            size_column="baggage_kg",
            size_phrase="baggage weight",
            size_unit="kilograms",
            size_range=(0, 46),
            large_term="heavy bookings",
            status_column="status",
            status_values=("flown", "cancelled", "refunded", "changed"),
            entity_knowledge_term="frequent flyers",
            top_term="top passengers",
        ),
    )
}

#: The default training domains (schema families) ...
TRAIN_DOMAINS: tuple[str, ...] = ("retail", "library", "hospital", "university")
#: ... and the held-out ones for evaluation: no table, column or phrase of these is trained on.
TEST_DOMAINS: tuple[str, ...] = ("sports", "flights")


def resolve_domains(domains: str | tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
    """Domain names from ``"train"``, ``"test"``, ``"all"``/None, or a sequence of names.

    >>> resolve_domains("test"), len(resolve_domains(None))
    (('sports', 'flights'), 6)
    """
    if domains is None or domains == "all":
        return tuple(DOMAINS)
    if domains == "train":
        return TRAIN_DOMAINS
    if domains == "test":
        return TEST_DOMAINS
    if isinstance(domains, str):
        domains = tuple(d.strip() for d in domains.split(",") if d.strip())
    chosen = tuple(domains)
    unknown = sorted(set(chosen) - set(DOMAINS))
    if unknown or not chosen:
        raise ConfigurationError(
            f"unknown domains {unknown or chosen}; choose from {sorted(DOMAINS)}, "
            "'train', 'test' or 'all'"
        )
    return chosen

"""Hand-written reference passages for the bundled instruction set (closed QA, summaries, extraction).

Every passage was written for this project. Each carries questions answerable from
the passage alone, a one- or two-sentence summary and one extraction task.
"""

PASSAGES: list[dict] = [
    {
        "title": "Lighthouse keepers",
        "text": "Before automation, most lighthouses were staffed by keepers who trimmed wicks, wound the clockwork "
        "that turned the lens and logged the weather every few hours. On remote rocks a crew of three "
        "usually rotated so that one keeper was always on shore leave. Automation spread through the 1970s "
        "and 1980s as electric lamps, photocells and radio monitoring made a resident crew unnecessary, and "
        "the last keepers on many coasts left their stations in the 1990s.",
        "qa": [
            (
                "Why did lighthouses stop needing resident keepers?",
                "Electric lamps, photocells and radio monitoring made it possible to run a lighthouse without a crew "
                "living on site.",
            ),
            (
                "How many keepers typically staffed a remote rock lighthouse?",
                "Usually three, rotating so that one of them was always on shore leave.",
            ),
        ],
        "summary": "Lighthouse keepers maintained the light and logged the weather until automation in the 1970s "
        "and 1980s replaced them; the last ones left in the 1990s.",
        "extract": (
            "List the duties of a lighthouse keeper mentioned in the text.",
            "- Trimming the wicks\n- Winding the clockwork that turned the lens\n- Logging the weather every few hours",
        ),
    },
    {
        "title": "Sourdough starter",
        "text": "A sourdough starter is a mixture of flour and water colonised by wild yeasts and lactic acid "
        "bacteria. Bakers keep it alive by discarding part of it and feeding it fresh flour and water, "
        "often once a day at room temperature or once a week when stored in the refrigerator. The yeasts "
        "produce carbon dioxide that raises the dough, while the bacteria produce the acids that give the "
        "bread its sour taste and help it keep longer.",
        "qa": [
            (
                "What gives sourdough bread its sour taste?",
                "The lactic acid bacteria in the starter, which produce acids.",
            ),
            ("How often is a refrigerated starter fed?", "About once a week."),
        ],
        "summary": "A sourdough starter is flour and water full of wild yeasts, which raise the bread, and lactic "
        "acid bacteria, which sour it; it is kept alive by regular feeding.",
        "extract": (
            "Which two kinds of microorganisms live in a sourdough starter?",
            "Wild yeasts and lactic acid bacteria.",
        ),
    },
    {
        "title": "The Hanseatic League",
        "text": "The Hanseatic League was a network of merchant guilds and market towns that dominated trade in "
        "the Baltic and North Sea from the thirteenth to the fifteenth century. Lübeck served as its "
        "informal capital, and the league kept trading posts called kontors in London, Bruges, Bergen and "
        "Novgorod. Its decline came as territorial states grew stronger and as Dutch and English merchants "
        "competed for the same routes.",
        "qa": [
            ("Which city acted as the informal capital of the Hanseatic League?", "Lübeck."),
            (
                "Why did the Hanseatic League decline?",
                "Territorial states grew stronger and Dutch and English merchants competed for the same trade routes.",
            ),
        ],
        "summary": "The Hanseatic League, centred on Lübeck, controlled Baltic and North Sea trade for about three "
        "centuries before stronger states and foreign rivals eroded it.",
        "extract": (
            "Extract the cities where the league kept kontors, as a comma-separated list.",
            "London, Bruges, Bergen, Novgorod",
        ),
    },
    {
        "title": "Heat pumps",
        "text": "A heat pump moves heat instead of producing it. In heating mode it absorbs heat from outdoor air, "
        "the ground or water into a refrigerant, compresses the refrigerant to raise its temperature, and "
        "releases that heat indoors. Because moving heat takes less energy than generating it, a typical "
        "air-source heat pump delivers three to four units of heat for each unit of electricity it uses, "
        "although the ratio falls as the outdoor temperature drops.",
        "qa": [
            (
                "Why can a heat pump deliver more heat than the electricity it consumes?",
                "It moves existing heat from outside rather than generating it, and moving heat takes less energy.",
            ),
            (
                "What happens to a heat pump's efficiency in colder weather?",
                "It falls: the ratio of heat delivered to electricity used drops as the outdoor temperature drops.",
            ),
        ],
        "summary": "Heat pumps move heat from outside into a building using a compressed refrigerant, typically "
        "delivering three to four times the energy they consume, less in cold weather.",
        "extract": (
            "From the passage, list the heat sources a heat pump can draw from.",
            "Outdoor air, the ground and water.",
        ),
    },
    {
        "title": "Honeybee waggle dance",
        "text": "Forager honeybees that find a good source of nectar return to the hive and perform a waggle dance "
        "on the vertical comb. The angle of the waggle run relative to straight up tells other bees the "
        "direction of the food relative to the sun, and the duration of the run tells them the distance. "
        "Karl von Frisch described the dance in detail and shared the 1973 Nobel Prize in Physiology or "
        "Medicine for the work.",
        "qa": [
            ("What does the length of the waggle run communicate?", "The distance to the food source."),
            (
                "Who described the waggle dance in detail?",
                "Karl von Frisch, who shared the 1973 Nobel Prize in Physiology or Medicine for it.",
            ),
        ],
        "summary": "Honeybees use the angle and length of a waggle dance to tell nestmates the direction and "
        "distance of food, a behaviour decoded by Karl von Frisch.",
        "extract": (
            "What year is mentioned in the passage and what happened then?",
            "1973: Karl von Frisch shared the Nobel Prize in Physiology or Medicine.",
        ),
    },
    {
        "title": "Container shipping",
        "text": "Standardised shipping containers, popularised in the late 1950s, cut the cost of loading cargo "
        "dramatically because a crane could move a sealed box instead of dock workers handling each item. "
        "The twenty-foot equivalent unit, or TEU, became the industry's measure of capacity. Today the "
        "largest container ships carry more than twenty thousand TEU, and ports compete on how quickly they "
        "can turn such a ship around.",
        "qa": [
            ("What does TEU stand for?", "Twenty-foot equivalent unit."),
            (
                "Why did containers reduce loading costs?",
                "A crane could lift a whole sealed box instead of workers handling every item by hand.",
            ),
        ],
        "summary": "Shipping containers, measured in TEU, made cargo handling far cheaper from the late 1950s; the "
        "biggest ships now carry over twenty thousand TEU.",
        "extract": (
            "Extract every number or quantity mentioned in the passage.",
            "- The late 1950s\n- Twenty-foot (the TEU)\n- More than twenty thousand TEU",
        ),
    },
    {
        "title": "Tidal range",
        "text": "The tidal range is the difference in height between high and low tide. It depends on the shape of "
        "the coastline and the sea floor as much as on the pull of the moon and sun. Funnel-shaped bays "
        "amplify the tide, which is why the Bay of Fundy in Canada sees ranges of over fifteen metres, "
        "while enclosed seas such as the Mediterranean have ranges of only a few tens of centimetres.",
        "qa": [
            ("Why does the Bay of Fundy have such a large tidal range?", "Its funnel shape amplifies the tide."),
            ("What is the tidal range?", "The difference in height between high tide and low tide."),
        ],
        "summary": "Tidal range depends on coastline shape as well as the moon and sun: funnel-shaped bays like "
        "Fundy exceed fifteen metres, enclosed seas see only centimetres.",
        "extract": (
            "Name the places mentioned in the passage and the tidal range given for each.",
            "- Bay of Fundy, Canada: over fifteen metres\n- The Mediterranean: a few tens of centimetres",
        ),
    },
    {
        "title": "Version control",
        "text": "A version control system records changes to a set of files over time so that earlier versions "
        "can be recovered. Centralised systems keep the history on one server, while distributed systems "
        "such as Git give every developer a full copy of the history. Branches let several lines of work "
        "proceed in parallel, and merging brings them back together, sometimes requiring a person to "
        "resolve conflicting edits to the same lines.",
        "qa": [
            (
                "What is the main difference between centralised and distributed version control?",
                "Centralised systems keep the history on one server; distributed systems give every developer a "
                "full copy of it.",
            ),
            (
                "When does a merge need a person to intervene?",
                "When two branches made conflicting edits to the same lines.",
            ),
        ],
        "summary": "Version control keeps the history of files; distributed systems like Git copy that history to "
        "every developer, and branches are merged back, sometimes with manual conflict resolution.",
        "extract": ("Which version control system is named in the text?", "Git."),
    },
    {
        "title": "Monsoon",
        "text": "A monsoon is a seasonal reversal of the prevailing wind that brings a distinct wet season. In South "
        "Asia, land heats faster than the Indian Ocean in late spring, drawing moist ocean air inland from "
        "about June to September. Farmers depend on the timing of the monsoon rains for sowing rice and "
        "other crops, and a late or weak monsoon can reduce harvests across the region.",
        "qa": [
            (
                "What causes the South Asian summer monsoon?",
                "Land heating faster than the Indian Ocean in late spring, which draws moist ocean air inland.",
            ),
            ("During which months does the South Asian monsoon usually bring rain?", "From about June to September."),
        ],
        "summary": "The South Asian monsoon is a seasonal wind reversal that brings rain from June to September, "
        "and harvests depend on its timing and strength.",
        "extract": ("What crop is mentioned in the passage?", "Rice."),
    },
    {
        "title": "Suspension bridges",
        "text": "In a suspension bridge the deck hangs from vertical suspenders attached to main cables that pass "
        "over tall towers and are anchored in massive blocks at each end. The cables carry the load in "
        "tension, which lets suspension bridges span longer distances than any other type. Early designs "
        "were vulnerable to wind, and the 1940 collapse of the Tacoma Narrows Bridge led engineers to test "
        "deck shapes in wind tunnels.",
        "qa": [
            (
                "How is the load carried in a suspension bridge?",
                "By the main cables, in tension; the deck hangs from suspenders attached to them.",
            ),
            (
                "What event led engineers to test bridge decks in wind tunnels?",
                "The 1940 collapse of the Tacoma Narrows Bridge.",
            ),
        ],
        "summary": "Suspension bridges hang their decks from cables in tension, allowing the longest spans; wind "
        "failures such as Tacoma Narrows in 1940 made wind-tunnel testing standard.",
        "extract": (
            "List the structural parts of a suspension bridge named in the passage.",
            "Deck, vertical suspenders, main cables, towers and anchor blocks.",
        ),
    },
    {
        "title": "Fermentation of tea",
        "text": "Green, oolong and black teas all come from the leaves of the same plant, Camellia sinensis. The "
        "difference lies in processing: green tea is heated soon after picking to stop the leaves from "
        "oxidising, oolong is partly oxidised, and black tea is rolled and left to oxidise fully, which "
        "darkens the leaves and changes the flavour. The process is often called fermentation, although "
        "it is driven by the leaf's own enzymes rather than by microbes.",
        "qa": [
            (
                "Do green and black tea come from different plants?",
                "No. Both come from Camellia sinensis; they differ only in how the leaves are processed.",
            ),
            (
                "What actually drives the so-called fermentation of tea?",
                "The leaf's own enzymes, through oxidation, not microbes.",
            ),
        ],
        "summary": "Green, oolong and black teas come from one plant and differ in how far the leaves are allowed "
        "to oxidise.",
        "extract": (
            "Classify each tea in the passage by its degree of oxidation.",
            "- Green tea: not oxidised\n- Oolong: partly oxidised\n- Black tea: fully oxidised",
        ),
    },
    {
        "title": "Public libraries",
        "text": "Public libraries funded by local taxes spread in the nineteenth century, and the steel magnate "
        "Andrew Carnegie paid for more than 2,500 library buildings around the world on the condition that "
        "towns provide the site and fund the running costs. Modern libraries lend e-books and audiobooks, "
        "offer free internet access and run classes, and many report that their busiest service is help "
        "with everyday digital tasks.",
        "qa": [
            (
                "What condition did Carnegie attach to his library grants?",
                "The town had to provide the site and pay the running costs.",
            ),
            (
                "Besides books, what do modern libraries offer?",
                "E-books and audiobooks, free internet access, classes and help with digital tasks.",
            ),
        ],
        "summary": "Tax-funded public libraries spread in the 1800s with help from Andrew Carnegie's grants, and "
        "today they also provide digital lending, internet access and classes.",
        "extract": (
            "Extract the name of the person and the number associated with him.",
            "Andrew Carnegie: more than 2,500 library buildings.",
        ),
    },
    {
        "title": "Coral bleaching",
        "text": "Reef-building corals live in partnership with single-celled algae that live inside their tissues "
        "and supply most of their food through photosynthesis. When water stays unusually warm for weeks, "
        "the partnership breaks down and the coral expels the algae, leaving its white skeleton visible "
        "through clear tissue. Bleached corals can recover if temperatures fall soon enough, but prolonged "
        "bleaching often kills them.",
        "qa": [
            (
                "Why does a bleached coral look white?",
                "It has expelled the algae that colour it, so its white skeleton shows through its clear tissue.",
            ),
            (
                "Can corals recover from bleaching?",
                "Yes, if the water cools soon enough; prolonged bleaching often kills them.",
            ),
        ],
        "summary": "Heat stress makes corals expel the algae that feed them, turning them white; they can recover "
        "only if the water cools in time.",
        "extract": (
            "What do the algae provide to the coral?",
            "Most of the coral's food, made through photosynthesis.",
        ),
    },
    {
        "title": "The metric system",
        "text": "The metric system was introduced in France in the 1790s to replace hundreds of local units with "
        "a decimal system based on nature. The metre was originally defined as one ten-millionth of the "
        "distance from the North Pole to the equator. Since 2019 every base unit of the International "
        "System of Units, including the kilogram, has been defined by fixing the value of a physical "
        "constant.",
        "qa": [
            (
                "How was the metre originally defined?",
                "As one ten-millionth of the distance from the North Pole to the equator.",
            ),
            ("Where was the metric system introduced?", "In France, in the 1790s."),
        ],
        "summary": "France introduced the decimal metric system in the 1790s; since 2019 all SI base units are "
        "defined through fixed physical constants.",
        "extract": (
            "List the dates in the passage with what happened at each.",
            "- 1790s: the metric system was introduced in France\n- 2019: every SI base unit came to be "
            "defined by fixing a physical constant",
        ),
    },
    {
        "title": "Compost",
        "text": "Composting turns kitchen and garden waste into a dark, crumbly soil improver. Microbes do most of "
        "the work, and they need a balance of nitrogen-rich green material such as vegetable peelings and "
        "grass clippings and carbon-rich brown material such as dry leaves and cardboard. A heap that is "
        "turned regularly gets enough air to stay hot, which speeds decomposition and kills many weed "
        "seeds.",
        "qa": [
            (
                "Why should a compost heap be turned?",
                "Turning lets air in so the heap stays hot, which speeds decomposition and kills weed seeds.",
            ),
            ("Give two examples of brown material.", "Dry leaves and cardboard."),
        ],
        "summary": "Compost forms when microbes break down a balanced mix of green and brown waste; turning the "
        "heap keeps it hot and fast.",
        "extract": (
            "Sort the materials in the passage into green and brown.",
            "Green: vegetable peelings, grass clippings\nBrown: dry leaves, cardboard",
        ),
    },
    {
        "title": "Byzantine Empire",
        "text": "The Byzantine Empire was the continuation of the Roman Empire in the east, with its capital at "
        "Constantinople. It preserved Roman law, which Emperor Justinian had compiled in the sixth century, "
        "and Greek became the language of government. The empire lasted until 1453, when the Ottoman army "
        "under Mehmed II captured Constantinople.",
        "qa": [
            (
                "When did the Byzantine Empire end?",
                "In 1453, when the Ottomans under Mehmed II captured Constantinople.",
            ),
            ("Which emperor compiled Roman law?", "Justinian, in the sixth century."),
        ],
        "summary": "The Byzantine Empire carried on the eastern Roman state from Constantinople, preserving Roman "
        "law, until the Ottoman conquest of 1453.",
        "extract": ("Extract the names of the rulers in the passage.", "Justinian and Mehmed II."),
    },
    {
        "title": "Caching",
        "text": "A cache is a small, fast store that keeps copies of data likely to be needed again. A processor "
        "cache holds recently used memory, a web browser caches images and scripts, and a content "
        "delivery network caches pages close to users. Every cache needs an eviction policy for when it "
        "is full; least recently used, which discards the item untouched for the longest time, is a common "
        "choice. The hard part is invalidation: knowing when a cached copy no longer matches the original.",
        "qa": [
            (
                "What does the least recently used policy discard?",
                "The item that has gone untouched for the longest time.",
            ),
            (
                "According to the passage, what is the hard part of caching?",
                "Invalidation: knowing when a cached copy no longer matches the original.",
            ),
        ],
        "summary": "Caches keep fast copies of data likely to be reused, evicting items such as the least recently "
        "used when full; invalidation is the hard part.",
        "extract": (
            "List the examples of caches given in the passage.",
            "- A processor cache\n- A web browser's cache\n- A content delivery network",
        ),
    },
    {
        "title": "Olive oil",
        "text": "Extra virgin olive oil is pressed from olives without heat or chemical solvents and must meet "
        "limits on acidity and pass a tasting panel. Its flavour depends on the olive variety, the ripeness "
        "at harvest and how quickly the fruit is milled after picking. Light and heat degrade the oil, so "
        "producers bottle it in dark glass or tins and recommend using it within a year or two of "
        "harvest.",
        "qa": [
            ("Why is olive oil often sold in dark glass?", "Light degrades the oil."),
            (
                "What affects the flavour of olive oil?",
                "The olive variety, how ripe the olives were at harvest and how quickly they were milled.",
            ),
        ],
        "summary": "Extra virgin olive oil is cold-extracted, checked for acidity and taste, and should be kept "
        "from light and heat and used within a year or two.",
        "extract": (
            "What two requirements must extra virgin olive oil meet?",
            "It must stay within limits on acidity and pass a tasting panel.",
        ),
    },
    {
        "title": "Glaciers",
        "text": "A glacier forms where more snow falls each winter than melts each summer, so that the snow "
        "compacts into ice over many years. Under its own weight the ice flows slowly downhill, carving "
        "U-shaped valleys and carrying rock that it leaves behind as moraines when it melts. Most mountain "
        "glaciers have been shrinking since the middle of the nineteenth century.",
        "qa": [
            (
                "What conditions allow a glacier to form?",
                "More snow falling each winter than melts each summer, so snow compacts into ice over years.",
            ),
            ("What are moraines?", "Deposits of rock that a glacier carried and left behind as it melted."),
        ],
        "summary": "Glaciers form from accumulated snow compressed into ice, flow downhill shaping valleys and "
        "leaving moraines, and most have been retreating since the mid-1800s.",
        "extract": ("What landforms does the passage say glaciers create?", "U-shaped valleys and moraines."),
    },
    {
        "title": "Vaccines",
        "text": "A vaccine trains the immune system to recognise a pathogen without causing the disease. Older "
        "vaccines use weakened or inactivated viruses, others use a single protein from the pathogen, and "
        "mRNA vaccines give cells instructions to make that protein briefly themselves. When enough of a "
        "population is immune, a disease struggles to spread, which also protects people who cannot be "
        "vaccinated.",
        "qa": [
            (
                "How do mRNA vaccines work?",
                "They give cells temporary instructions to make a protein from the pathogen, which trains the "
                "immune system.",
            ),
            (
                "How does widespread vaccination protect people who cannot be vaccinated?",
                "When enough people are immune, the disease struggles to spread at all.",
            ),
        ],
        "summary": "Vaccines, whether weakened pathogens, single proteins or mRNA, teach the immune system to "
        "recognise a pathogen, and high coverage protects the whole population.",
        "extract": (
            "List the types of vaccines described.",
            "- Weakened or inactivated viruses\n- A single protein from the pathogen\n- mRNA vaccines",
        ),
    },
    {
        "title": "Chess openings",
        "text": "The opening of a chess game is the first dozen or so moves, during which players develop their "
        "pieces, fight for the centre and make their king safe, usually by castling. Openings have names "
        "such as the Sicilian Defence or the Queen's Gambit, and strong players memorise long sequences of "
        "them. Beginners are usually advised to learn the principles rather than memorise lines.",
        "qa": [
            (
                "What are the goals of the opening phase in chess?",
                "Developing the pieces, fighting for the centre and making the king safe, usually by castling.",
            ),
            (
                "What are beginners advised to do about openings?",
                "Learn the principles rather than memorise sequences of moves.",
            ),
        ],
        "summary": "Chess openings are the first dozen moves, spent developing pieces, contesting the centre and "
        "castling; beginners should learn principles before memorising named lines.",
        "extract": ("Extract the named openings from the text.", "The Sicilian Defence and the Queen's Gambit."),
    },
    {
        "title": "Solar panels",
        "text": "Most solar panels are made of crystalline silicon cells that turn sunlight directly into "
        "electricity. A typical rooftop panel converts around twenty percent of the light that hits it, and "
        "its output falls slowly, often by about half a percent a year. Panels produce direct current, so an "
        "inverter converts it to the alternating current used in homes and on the grid.",
        "qa": [
            (
                "What does an inverter do in a solar installation?",
                "It converts the panels' direct current into alternating current for the home and the grid.",
            ),
            ("How efficient is a typical rooftop panel?", "It converts around twenty percent of the light."),
        ],
        "summary": "Silicon solar panels convert about a fifth of incoming light into direct current, which an "
        "inverter turns into alternating current; output declines slowly with age.",
        "extract": (
            "Extract the two percentages mentioned and what each refers to.",
            "- About twenty percent: the share of light a typical panel converts\n- About half a percent: "
            "how much output falls each year",
        ),
    },
    {
        "title": "The printing press",
        "text": "Johannes Gutenberg developed a printing press with movable metal type in Mainz around 1450. "
        "Casting many identical letters from a mould made it practical to set and reset whole pages, and "
        "an oil-based ink adhered well to the metal. Within fifty years printing shops operated in more "
        "than two hundred European towns, and the price of books fell sharply.",
        "qa": [
            ("Where and when did Gutenberg develop his press?", "In Mainz, around 1450."),
            ("What happened to book prices after printing spread?", "They fell sharply."),
        ],
        "summary": "Gutenberg's movable-type press of about 1450 spread to over two hundred European towns within "
        "fifty years and made books much cheaper.",
        "extract": (
            "What innovations does the passage attribute to Gutenberg's press?",
            "Movable metal type cast from a mould, and an oil-based ink that adhered to the metal.",
        ),
    },
    {
        "title": "Sleep cycles",
        "text": "During a night's sleep adults pass through cycles of roughly ninety minutes. Each cycle moves from "
        "light sleep into deep slow-wave sleep and then into rapid eye movement sleep, when most vivid "
        "dreaming happens. Deep sleep dominates the early cycles and REM sleep the later ones, which is "
        "one reason a short night cuts REM sleep disproportionately.",
        "qa": [
            ("How long is a typical sleep cycle?", "Roughly ninety minutes."),
            (
                "Why does a short night reduce REM sleep the most?",
                "REM sleep dominates the later cycles, which a short night cuts off.",
            ),
        ],
        "summary": "Sleep runs in ninety-minute cycles of light, deep and REM sleep, with REM concentrated late in "
        "the night.",
        "extract": (
            "List the stages of a sleep cycle in order.",
            "1. Light sleep\n2. Deep slow-wave sleep\n3. Rapid eye movement (REM) sleep",
        ),
    },
]

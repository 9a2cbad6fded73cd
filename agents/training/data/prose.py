"""Hand-written questions, answers, lists and short pieces for the bundled instruction set."""

OPEN_QA: list[tuple[str, str]] = [
    ("What is the boiling point of water at sea level?", "100 degrees Celsius, or 212 degrees Fahrenheit."),
    (
        "Why is the sky blue?",
        "Air molecules scatter short blue wavelengths of sunlight much more strongly than "
        "long red ones, so blue light reaches your eyes from every direction of the sky.",
    ),
    (
        "What is photosynthesis?",
        "The process by which plants, algae and some bacteria use light energy to turn "
        "carbon dioxide and water into sugars, releasing oxygen.",
    ),
    ("Who wrote Pride and Prejudice?", "Jane Austen; it was published in 1813."),
    ("What is the largest ocean on Earth?", "The Pacific Ocean."),
    ("How many bones are in the adult human body?", "206."),
    (
        "What does a compiler do?",
        "It translates source code written in a programming language into a lower-level "
        "form, such as machine code, that a computer can execute.",
    ),
    ("What is the capital of Australia?", "Canberra."),
    (
        "What causes the seasons on Earth?",
        "The tilt of Earth's axis: as Earth orbits the sun, each hemisphere "
        "leans towards the sun for part of the year, getting longer days and more direct sunlight.",
    ),
    (
        "What is inflation?",
        "A general rise in prices over time, which means a unit of money buys less than it did before.",
    ),
    ("What is the speed of light in a vacuum?", "About 299,792 kilometres per second."),
    (
        "What is a prime number?",
        "A whole number greater than 1 whose only divisors are 1 and itself, such as 2, 3, 5, 7 and 11.",
    ),
    ("Which planet is known as the Red Planet?", "Mars, because iron oxide in its dust gives it a reddish colour."),
    ("What is the main ingredient of guacamole?", "Avocado."),
    ("What does DNA stand for?", "Deoxyribonucleic acid."),
    ("What is a haiku?", "A short Japanese poetic form of three lines with five, seven and five syllables."),
    (
        "What is the difference between weather and climate?",
        "Weather is the state of the atmosphere at a "
        "particular time and place; climate is the average pattern of weather over decades.",
    ),
    (
        "What is an API?",
        "An application programming interface: a defined set of requests a piece of software "
        "accepts, so that other programs can use it without knowing how it works inside.",
    ),
    (
        "How do vaccines protect against disease?",
        "They expose the immune system to a harmless part or version "
        "of a pathogen so it learns to recognise and fight the real thing quickly.",
    ),
    ("What is the tallest mountain above sea level?", "Mount Everest, at about 8,849 metres."),
    (
        "What is a leap year?",
        "A year with an extra day, 29 February, added to keep the calendar in step with "
        "Earth's orbit. Years divisible by 4 are leap years, except century years not divisible by 400.",
    ),
    (
        "Why do cats purr?",
        "Cats purr when content, but also when stressed or injured; the vibration may soothe "
        "them and is thought to help with healing.",
    ),
    (
        "What is the function of the heart?",
        "It pumps blood around the body, carrying oxygen and nutrients to "
        "the tissues and removing carbon dioxide and waste.",
    ),
    (
        "What is a black hole?",
        "A region of space where gravity is so strong that nothing, not even light, can "
        "escape once it crosses the event horizon.",
    ),
    ("Who painted the Mona Lisa?", "Leonardo da Vinci."),
    (
        "What is machine learning?",
        "A field of computing in which programs improve at a task by learning "
        "patterns from data rather than following hand-written rules.",
    ),
    ("What is the chemical symbol for gold?", "Au, from the Latin word aurum."),
    ("What is the longest river in South America?", "The Amazon."),
    (
        "What is an interest rate?",
        "The cost of borrowing money, expressed as a percentage of the amount borrowed per year.",
    ),
    (
        "What is a sonnet?",
        "A fourteen-line poem with a fixed rhyme scheme, traditionally written in iambic pentameter.",
    ),
    (
        "How does a refrigerator keep food cold?",
        "A refrigerant absorbs heat inside the fridge as it evaporates, "
        "then a compressor pumps it to coils at the back, where it releases the heat into the room.",
    ),
    (
        "What is the Great Barrier Reef?",
        "The world's largest coral reef system, off the coast of Queensland, Australia.",
    ),
    (
        "What is a GPU?",
        "A graphics processing unit: a processor with thousands of simple cores designed for "
        "parallel arithmetic, used for graphics and for training machine learning models.",
    ),
    ("What language is spoken in Brazil?", "Portuguese."),
    ("What is the freezing point of water in Fahrenheit?", "32 degrees Fahrenheit."),
    (
        "What is a fixed-rate mortgage?",
        "A home loan whose interest rate stays the same for an agreed period, so "
        "the monthly payments do not change during that time.",
    ),
    (
        "What is the Pythagorean theorem?",
        "In a right-angled triangle, the square of the hypotenuse equals the "
        "sum of the squares of the other two sides: a² + b² = c².",
    ),
    (
        "Why do leaves change colour in autumn?",
        "As days shorten, trees stop making green chlorophyll, revealing "
        "yellow and orange pigments; some trees also make red pigments.",
    ),
    (
        "What is a firewall?",
        "A system that filters network traffic according to rules, blocking connections that are not allowed.",
    ),
    ("How many players are on a football team on the pitch?", "Eleven, including the goalkeeper."),
    ("What is the smallest unit of life?", "The cell."),
    (
        "What does a thermostat do?",
        "It measures the temperature and switches heating or cooling on and off to keep it near a set value.",
    ),
    (
        "What is the difference between a virus and a bacterium?",
        "Bacteria are single-celled living organisms "
        "that can reproduce on their own; viruses are much smaller and can only reproduce inside a host's cells.",
    ),
    (
        "What is an electric current?",
        "A flow of electric charge, usually electrons moving through a conductor, measured in amperes.",
    ),
    (
        "What is a democracy?",
        "A system of government in which citizens hold power, usually by electing "
        "representatives in free and regular elections.",
    ),
]

GENERAL_QA: list[tuple[str, str]] = [
    (
        "How can I improve my sleep?",
        "Keep a regular schedule, even at weekends; get daylight in the morning; "
        "avoid caffeine after early afternoon; keep the bedroom dark, quiet and cool; and put screens away for the "
        "last half hour before bed.",
    ),
    (
        "What should I consider when buying a used bicycle?",
        "Check that the frame fits you and has no cracks or "
        "dents, that the wheels spin true, that the brakes and gears work smoothly, and that the chain and tyres are "
        "not worn out. Ask for the bike's history and compare the price with similar listings.",
    ),
    (
        "Is it better to rent or buy a home?",
        "It depends on how long you plan to stay, local prices compared "
        "with rents, interest rates and your savings. Buying builds equity over the long term but costs a lot up "
        "front and ties you down; renting is more flexible and leaves your savings free for other investments.",
    ),
    (
        "How do I start learning to program?",
        "Pick one beginner-friendly language such as Python, follow a "
        "structured course, and write small programs that solve problems you care about. Read other people's code, "
        "and practise a little every day rather than in rare long sessions.",
    ),
    (
        "Why should I back up my files?",
        "Disks fail, laptops are lost and ransomware encrypts data. A backup, "
        "ideally with one copy off-site, lets you recover your photos, documents and work when that happens.",
    ),
    (
        "What makes a good presentation?",
        "A clear message, a structure the audience can follow, slides that "
        "support rather than repeat what you say, and rehearsal. End with what you want the audience to remember "
        "or do.",
    ),
    (
        "How can I reduce food waste at home?",
        "Plan meals before shopping, buy only what you need, store food "
        "properly, freeze leftovers, and cook with what is about to go off first.",
    ),
    (
        "What are the benefits of walking every day?",
        "Daily walking improves heart health, helps control weight, "
        "strengthens bones and muscles, lifts mood and can improve sleep, all with little risk of injury.",
    ),
    (
        "How do I write a good cover letter?",
        "Address it to a person where possible, explain why you want this "
        "particular job, give two or three concrete examples of relevant achievements, and keep it to one page.",
    ),
    (
        "Why is my bread dense?",
        "Common causes are too little kneading, under-proofing, old or dead yeast, too "
        "much flour, or an oven that is not hot enough.",
    ),
    (
        "How should I prepare for a job interview?",
        "Research the company, reread the job description, prepare "
        "short stories that show your skills, practise answers aloud, and prepare a few questions of your own.",
    ),
    (
        "What is a good way to learn a new language?",
        "Use it daily: learn common words with spaced repetition, "
        "listen to podcasts or shows, speak with native speakers as early as possible, and do not fear mistakes.",
    ),
    (
        "Should I use a password manager?",
        "Yes. A password manager lets you use a long, unique password for "
        "every site without memorising them, which protects you when one site is breached.",
    ),
    (
        "How do I keep houseplants healthy?",
        "Give each plant the light it needs, water only when the top of the "
        "soil is dry, use pots with drainage holes, and feed lightly during the growing season.",
    ),
    (
        "How can I be more productive when working from home?",
        "Keep regular hours, set up a dedicated workspace, "
        "plan the day's priorities each morning, take real breaks, and switch off notifications while focusing.",
    ),
    (
        "Why do programmers write tests?",
        "Tests check that code does what it should, catch mistakes when the code "
        "changes later, and document how the code is meant to be used.",
    ),
    (
        "What should I pack for a day hike?",
        "Water, food, a map, sun protection, a waterproof layer, a warm "
        "layer, a small first-aid kit, a charged phone and a head torch in case you finish late.",
    ),
    (
        "How do I make a budget?",
        "List your monthly income, then your fixed costs and your variable spending. "
        "Set a target for savings first, give every remaining pound or dollar a purpose, and review it each month.",
    ),
    (
        "Why does my phone battery drain quickly?",
        "Bright screens, weak signal, apps refreshing in the "
        "background, location services and an ageing battery are the usual causes.",
    ),
    (
        "What is the best way to memorise facts?",
        "Test yourself instead of rereading, space your reviews over "
        "increasing intervals, and connect new facts to things you already know.",
    ),
]

BRAINSTORMING: list[tuple[str, str]] = [
    (
        "Give me some ideas for a rainy day with children.",
        "- Build a blanket fort\n- Bake and decorate biscuits\n"
        "- Put on a puppet show\n- Do a treasure hunt around the house\n- Paint with watercolours\n- Play board "
        "games",
    ),
    (
        "What are some good names for a bakery?",
        "- The Rising Loaf\n- Crumb & Crust\n- Morning Oven\n- Flour Hour\n- The Proving Room",
    ),
    (
        "Suggest some hobbies that cost very little.",
        "- Walking and hiking\n- Reading library books\n- Drawing\n"
        "- Birdwatching\n- Running\n- Learning a language online\n- Gardening from seeds",
    ),
    (
        "List some ways to save energy at home.",
        "- Turn the thermostat down by one degree\n- Switch to LED "
        "bulbs\n- Wash clothes at lower temperatures\n- Draught-proof doors and windows\n- Turn off devices at the "
        "wall\n- Only boil the water you need",
    ),
    (
        "What could I cook with eggs, spinach and cheese?",
        "- A spinach and cheese omelette\n- Baked eggs on "
        "spinach\n- A frittata\n- Spinach and cheese quiche\n- Savoury muffins",
    ),
    (
        "Give me ideas for a team-building activity at work.",
        "- An escape room\n- A cooking class\n- A volunteer "
        "day\n- A quiz night\n- A hike followed by lunch\n- A hackathon on an internal problem",
    ),
    (
        "What are some ways to stay motivated while studying?",
        "- Set small, specific goals\n- Study with a "
        "friend\n- Use a timer for focused sessions\n- Reward yourself after finishing\n- Track your progress "
        "visibly",
    ),
    (
        "Suggest some themes for a birthday party.",
        "- Space adventure\n- Pirates\n- A 1980s disco\n- Garden picnic\n- Murder mystery\n- Favourite film characters",
    ),
    (
        "What are some things to do in a new city on a weekend?",
        "- Take a walking tour\n- Visit a local market\n"
        "- Try the regional food\n- See a museum or gallery\n- Find a viewpoint at sunset\n- Explore a "
        "neighbourhood away from the centre",
    ),
    (
        "Give me some ideas for a short story plot.",
        "- A lighthouse keeper finds a message in a bottle addressed "
        "to her\n- Two rival bakers must share one oven\n- A town's clocks all stop at the same minute\n- A "
        "translator realises the aliens are joking",
    ),
    (
        "List some uses for an old glass jar.",
        "- Storing dry food\n- A vase\n- A candle holder\n- A pen pot\n- Growing herbs\n- Making overnight oats",
    ),
    (
        "What are some ways to make a small room feel bigger?",
        "- Use light colours on the walls\n- Add a large "
        "mirror\n- Keep the floor clear\n- Choose furniture with legs\n- Use vertical storage\n- Let in natural "
        "light",
    ),
    (
        "Suggest some questions to ask at the end of a job interview.",
        "- What does success look like in the first "
        "six months?\n- How is the team organised?\n- What are the biggest challenges for the team right now?\n- How "
        "do you support learning?\n- What are the next steps in the process?",
    ),
    (
        "Give me some ideas for vegetarian dinners.",
        "- Chickpea curry\n- Mushroom risotto\n- Black bean tacos\n- "
        "Vegetable lasagne\n- Lentil shepherd's pie\n- Stir-fried tofu with greens",
    ),
    (
        "What are some good habits for writing clean code?",
        "- Give things descriptive names\n- Keep functions "
        "short and focused\n- Write tests\n- Remove dead code\n- Prefer simple solutions\n- Review your own diff "
        "before asking for a review",
    ),
    (
        "List some ways to reduce plastic use.",
        "- Carry a reusable bottle and bag\n- Buy loose fruit and "
        "vegetables\n- Choose bar soap and shampoo\n- Refill containers where shops allow it\n- Avoid single-use "
        "cutlery",
    ),
    (
        "What are some fun ways to exercise without a gym?",
        "- Cycling\n- Dancing\n- Hiking\n- Swimming in a lake "
        "or pool\n- Bodyweight circuits in a park\n- Playing frisbee",
    ),
    ("Suggest some names for a black and white cat.", "- Domino\n- Oreo\n- Tuxedo\n- Panda\n- Piano\n- Magpie"),
    (
        "What could I write in a thank-you card to a teacher?",
        "- Thank you for making every lesson interesting.\n"
        "- You helped me believe I could do it.\n- I will always remember your patience.\n- Thank you for a "
        "wonderful year.",
    ),
    (
        "Give me some ideas for a garden on a balcony.",
        "- Herbs in window boxes\n- Cherry tomatoes in pots\n- "
        "Strawberries in a hanging basket\n- Climbing beans on a trellis\n- Lavender for bees",
    ),
]

CREATIVE: list[tuple[str, str]] = [
    (
        "Write a short poem about the sea at night.",
        "The tide breathes slow beneath the moon,\nits silver "
        "hands on sleeping stone;\nthe harbour lights hum out of tune,\nand every wave comes home alone.",
    ),
    (
        "Write a two-sentence horror story.",
        "I finally fixed the baby monitor's static last night. This morning I remembered we don't have a baby.",
    ),
    (
        "Write a short product description for a handmade ceramic mug.",
        "Thrown by hand and glazed in a deep "
        "ocean blue, this stoneware mug holds a generous 350 ml and sits perfectly in two palms. Each piece is "
        "unique, dishwasher safe and made to be used every day.",
    ),
    ("Write a haiku about autumn.", "Red leaves on the path,\nthe wind counts them one by one,\nthen forgets the sum."),
    (
        "Write a short letter to a neighbour apologising for a noisy party.",
        "Dear neighbour,\n\nI am sorry about "
        "the noise on Saturday night. We celebrated my sister's birthday and it went on later and louder than it "
        "should have. Next time I will let you know in advance and keep it down after eleven. Please accept the "
        "enclosed cake as a peace offering.\n\nBest wishes,\nSam from number 12",
    ),
    (
        "Write the opening line of a mystery novel.",
        "The clock in the hall had stopped at ten past three, and only one person in the house knew why.",
    ),
    (
        "Write a limerick about a cat who loves cheese.",
        "A tabby who lived in Dundee\nate cheddar with "
        "breakfast and tea;\nshe said with a purr,\n\"It's the finest of fur-\ntastic foods for a cat such as "
        'me."',
    ),
    (
        "Describe a busy market in three sentences.",
        "Stalls crowd the square under striped awnings, piled with "
        "oranges, bread and bright bolts of cloth. Traders call out prices over the hiss of frying dough. Everyone "
        "seems to be carrying something and talking to someone.",
    ),
    (
        "Write a motivational message for a friend running her first marathon.",
        "You have already done the hard "
        "part: all those early mornings and long Sunday runs. Tomorrow is the celebration. Start slow, enjoy the "
        "crowd, and remember that every step is one you trained for. I will be waiting at the finish!",
    ),
    (
        "Write a short fable with a moral.",
        "A crow found a piece of bread and flew to the highest branch to eat "
        "it alone. A fox below praised her singing until she opened her beak to sing and dropped the bread. Moral: "
        "flattery usually wants something.",
    ),
    (
        "Write a tweet announcing the opening of a new community garden.",
        "Our community garden is open! 24 "
        "raised beds, a tool shed and a rainwater tank, all for the neighbourhood. Come and plant something this "
        "Saturday from 10am. Gloves provided.",
    ),
    (
        "Write a short description of a rainy city street.",
        "Rain blurs the shop signs into long smears of red "
        "and gold. Umbrellas jostle on the pavement, buses throw up sheets of water, and somewhere a café door "
        "opens, letting out warmth and the smell of coffee.",
    ),
]

"""Built-in English sentences for the `minilm` example (calibration, accuracy checks, demos).

Topics and lengths vary on purpose; some are questions. SENTENCES (128) is the evaluation and
demo set. PARAPHRASE_PAIRS lists pairs that say the same thing in different words, which a
real sentence-embedding model scores as more similar than unrelated sentences; both halves of
every pair are also in SENTENCES.

CALIBRATION_SENTENCES (160) are used only to calibrate INT8 quantization, so accuracy is never
measured on calibration data. They mimic real search and chat traffic: questions, commands,
reviews, headlines, code, URLs, emails, very short and long sentences, non-ASCII text and
emoji, typos and missing punctuation.

RETRIEVAL_QUERIES and RETRIEVAL_DOCUMENTS (40 each) are a small retrieval set: query i is best
answered by document i, and several documents come in close pairs on the same topic so that
every query has a near-miss distractor.

No sentence appears twice across all of these, and none is empty; `_check_unique` enforces
that at import.
"""

PARAPHRASE_PAIRS: list[tuple[str, str]] = [
    ("The cat is sleeping on the sofa.", "A cat naps on the couch."),
    ("How do I reset my password?", "What are the steps to change a forgotten password?"),
    ("The train to Berlin was delayed by two hours.", "Our Berlin train arrived two hours late."),
    ("She bought a new laptop for her studies.", "For university, she purchased a new notebook computer."),
    ("It is going to rain heavily tomorrow.", "Tomorrow there will be a lot of rain."),
    ("The company reported record profits this quarter.", "This quarter the firm earned more than ever before."),
    ("Can you recommend a good Italian restaurant nearby?", "Is there a nice Italian place to eat around here?"),
    ("The doctor told him to drink more water.", "His physician advised him to stay better hydrated."),
    ("The children played football in the park after school.", "After classes, the kids kicked a ball around in the park."),
    ("Please turn off the lights when you leave the room.", "Switch the lights off on your way out, please."),
    ("The museum is closed on Mondays.", "You cannot visit the museum on a Monday."),
    ("He finished the marathon in under four hours.", "He ran the full marathon in less than four hours."),
    ("Python is a popular programming language for data science.", "Many data scientists write their code in Python."),
    ("The bridge was built in the nineteenth century.", "Construction of the bridge dates back to the 1800s."),
    ("I forgot my umbrella at the office.", "I left my umbrella at work."),
    ("The recipe calls for two cups of flour.", "You need two cups of flour for this recipe."),
]

_OTHER_SENTENCES: list[str] = [
    # Science and nature
    "Photosynthesis converts sunlight, water and carbon dioxide into sugar and oxygen.",
    "The Moon takes about twenty-seven days to orbit the Earth.",
    "Why is the sky blue during the day but red at sunset?",
    "Honeybees communicate the location of flowers through a waggle dance.",
    "Volcanic eruptions can cool the global climate for several years.",
    "Water boils at a lower temperature at high altitude.",
    "DNA carries the genetic instructions for the growth of all known organisms.",
    "Octopuses have three hearts and blue blood.",
    "A light-year measures distance, not time.",
    "How many species of birds live in the Amazon rainforest?",
    "Glaciers in the Alps have lost a large share of their ice since 1900.",
    "Sharks existed long before the first trees appeared on land.",
    # Technology and computing
    "The new phone has a faster processor and a better camera.",
    "Matrix multiplication dominates the cost of running a neural network.",
    "Always back up your files before installing a major system update.",
    "What is the difference between a compiler and an interpreter?",
    "The server crashed because it ran out of memory.",
    "Quantization stores model weights with fewer bits to save memory.",
    "Open-source software lets anyone read and improve the code.",
    "My keyboard stopped working after I spilled coffee on it.",
    "The website loads slowly on older mobile devices.",
    "Is it safe to use public Wi-Fi for online banking?",
    "Engineers fixed the bug in the payment system overnight.",
    "Cloud storage makes it easy to share large files with colleagues.",
    # Food and cooking
    "Fresh basil makes this tomato sauce taste much better.",
    "Bake the bread for forty minutes until the crust is golden.",
    "Do you prefer tea or coffee in the morning?",
    "Sushi is traditionally eaten with soy sauce and wasabi.",
    "The soup was too salty, so we added more potatoes.",
    "Dark chocolate contains less sugar than milk chocolate.",
    "He grills vegetables every Sunday in summer.",
    "What wine goes well with grilled fish?",
    "Let the dough rest in the fridge overnight.",
    # Travel and places
    "Paris is famous for its cafes, museums and wide boulevards.",
    "The flight from Tokyo to Sydney takes about nine hours.",
    "Where can I buy a ticket for the city bus?",
    "The hotel room had a beautiful view of the harbour.",
    "Many tourists visit the Grand Canyon every summer.",
    "Remember to bring your passport to the airport.",
    "The old town is best explored on foot.",
    "Is the beach crowded at this time of year?",
    "We rented bicycles and rode along the canal.",
    # Sports and health
    "The team won the championship after a dramatic penalty shootout.",
    "Regular exercise lowers the risk of heart disease.",
    "She swims three kilometres before breakfast.",
    "Who scored the winning goal in last night's match?",
    "Stretching after a run helps prevent injuries.",
    "A good night's sleep improves concentration and mood.",
    "The tennis final lasted almost five hours.",
    "How much protein should an adult eat every day?",
    # Business and economy
    "Interest rates rose for the third time this year.",
    "The startup raised ten million dollars from investors.",
    "Inflation makes everyday groceries more expensive.",
    "Should I invest in stocks or keep my savings in a bank?",
    "The factory will hire two hundred new workers next spring.",
    "Online shopping has changed how people buy clothes.",
    "The meeting was postponed until next Thursday.",
    "Our sales team exceeded its target by fifteen percent.",
    # History and culture
    "The Roman Empire built roads that connected distant provinces.",
    "Shakespeare wrote both comedies and tragedies.",
    "When did the Berlin Wall fall?",
    "The printing press made books far cheaper to produce.",
    "Jazz music originated in New Orleans in the early twentieth century.",
    "The pyramids of Giza were built as tombs for the pharaohs.",
    "Many languages borrow words from Latin and Greek.",
    "The orchestra performed Beethoven's Ninth Symphony.",
    # Everyday life
    "I need to pick up the kids from school at three.",
    "The washing machine makes a strange noise when it spins.",
    "Could you lend me your pen for a moment?",
    "Our neighbours are renovating their kitchen.",
    "The dog barks every time the doorbell rings.",
    "I usually read a book before going to sleep.",
    "Don't forget to water the plants while I'm away.",
    "The traffic was terrible on the way home.",
    "What time does the supermarket open on Sundays?",
    "We celebrated my grandmother's ninetieth birthday with a big dinner.",
    "My brother is learning to play the guitar.",
    "The baby finally fell asleep after midnight.",
    # Education and work
    "Students must submit their essays by Friday.",
    "Learning a second language takes patience and practice.",
    "The professor explained the theory with simple examples.",
    "How do I write a good cover letter?",
    "She was promoted to head of the research department.",
    "Working from home saves me an hour of commuting every day.",
    "The library offers free courses on digital skills.",
    # Short and very short
    "Thank you!",
    "Good morning.",
    "Where are you?",
    "It works.",
    "Close the door.",
    # Longer sentences
    "After months of negotiations, the two countries finally signed a trade agreement that removes tariffs on most agricultural products.",
    "Although the forecast promised sunshine, a sudden storm forced the organisers to move the outdoor concert into the town hall.",
    "The research team trained a small language model on public domain books and found that it could summarise short stories surprisingly well.",
    "If you are travelling with children, it is a good idea to pack snacks, a change of clothes and something to keep them entertained.",
    "The city council approved a plan to plant ten thousand trees along its streets over the next five years to reduce summer heat.",
    "When the power went out during the exam, the students waited patiently in the dark until the teacher found a torch.",
]

SENTENCES: list[str] = [sentence for pair in PARAPHRASE_PAIRS for sentence in pair] + _OTHER_SENTENCES

# Used only to calibrate INT8 quantization, so accuracy is always checked on sentences the
# model was not calibrated on. Mixed like real search and chat traffic: typos, emoji, code, URLs.
CALIBRATION_SENTENCES: list[str] = [
    # Search-style questions
    "how to convert a pdf to word for free",
    "What is the capital of Australia?",
    "best running shoes for flat feet 2024",
    "Why does my cat knock things off the table?",
    "How long should I boil an egg for a runny yolk?",
    "Is it cheaper to fly on a Tuesday?",
    "what does HTTP 503 mean",
    "Who painted the ceiling of the Sistine Chapel?",
    "How many calories are in a banana?",
    "can dogs eat grapes",
    "What's the difference between weather and climate?",
    "When is the next total solar eclipse visible from Europe?",
    # Commands and assistant requests
    "Summarize this article in three bullet points.",
    "Translate 'where is the train station' into Spanish.",
    "Set a timer for 25 minutes.",
    "Write a polite email declining the meeting invitation.",
    "Remind me to call the dentist tomorrow at 9am.",
    "Give me five ideas for a rainy Saturday with toddlers.",
    "Explain recursion like I'm five.",
    "Play some relaxing piano music.",
    "Book a table for four at 7:30 pm on Friday.",
    # Product reviews
    "Battery lasts two full days, but the charger gets really hot.",
    "Terrible customer service, I waited 45 minutes on hold and then got disconnected.",
    "These headphones are comfortable enough to wear on a long-haul flight.",
    "The blender is loud but it crushes ice in seconds. 4/5 stars.",
    "Arrived broken. The box was fine, so it must have been packed damaged.",
    "honestly the best pizza ive had outside of naples",
    "The jacket runs small, so order one size up.",
    "Great value for money — would buy again! 👍",
    "The app keeps logging me out every time I switch networks.",
    # News headlines
    "Central Bank Holds Rates Steady Amid Slowing Growth",
    "Wildfire Forces Thousands to Evacuate in Southern California",
    "Local Team Clinches Playoff Spot With Last-Minute Goal",
    "Scientists Discover New Species of Frog in Ecuadorian Cloud Forest",
    "Government Announces €2 Billion Plan to Upgrade Rail Network",
    "Tech Giant Recalls 1.2 Million Chargers Over Fire Risk",
    "Heatwave Breaks June Temperature Records Across Northern Europe",
    # Programming
    "A Python list comprehension is often faster than an explicit for loop.",
    "TypeError: 'NoneType' object is not subscriptable",
    "Use `git rebase -i HEAD~3` to squash the last three commits.",
    "The function returns early if the input array is empty.",
    "Rust's borrow checker prevents data races at compile time.",
    "for i in range(10): print(i * i)",
    "Unit tests should not depend on the order in which they run.",
    "JavaScript applies type coercion when you compare values with == instead of ===.",
    "Pin your dependencies so that builds are reproducible.",
    "The garbage collector pauses the application for a few milliseconds.",
    "const user = await fetch('/api/users/42').then(r => r.json());",
    # Networking
    "The router assigns IP addresses to devices using DHCP.",
    "Ping 8.8.8.8 to check whether the internet connection is up.",
    "TCP guarantees ordered delivery, while UDP does not.",
    "Our VPN drops every few minutes when I'm on hotel Wi-Fi.",
    "DNS translates domain names like example.com into IP addresses.",
    "Open port 443 on the firewall to allow HTTPS traffic.",
    "Latency between the two data centres is about 12 ms.",
    # Databases
    "SELECT name, email FROM customers WHERE created_at > '2023-01-01';",
    "Adding an index on the foreign key made the join ten times faster.",
    "PostgreSQL supports JSON columns and full-text search.",
    "A transaction either commits completely or rolls back completely.",
    "The migration failed because the column already exists.",
    "How do I back up a MySQL database without locking the tables?",
    # Medical
    "Take one tablet twice a day with food.",
    "What are the early symptoms of type 2 diabetes?",
    "The patient reported chest pain radiating to the left arm.",
    "Children should get the measles vaccine in two doses.",
    "High blood pressure often causes no symptoms at all.",
    "Is ibuprofen safe to take during pregnancy?",
    "An MRI scan showed a small tear in the rotator cuff.",
    # Legal
    "The tenant must give sixty days' written notice before moving out.",
    "Can my employer read my work emails?",
    "The contract is void if either party breaches the confidentiality clause.",
    "A will must be signed in the presence of two witnesses.",
    "The court dismissed the case for lack of evidence.",
    "What happens if I ignore a parking ticket?",
    # Finance
    "Your monthly mortgage payment will be $1,842.17 at a fixed rate of 4.5%.",
    "Diversifying across asset classes reduces portfolio risk.",
    "How do I file taxes as a freelancer?",
    "The stock fell 8% after the earnings report missed expectations.",
    "Transfer €250 from my savings account to checking.",
    "Compound interest grows faster the earlier you start saving.",
    "Is a Roth IRA better than a traditional IRA?",
    # Travel
    "Do I need a visa to visit Brazil with a Canadian passport?",
    "The ferry to the island leaves every hour from pier 3.",
    "Our luggage was lost during the layover in Frankfurt.",
    "cheap hotels near barcelona sagrada familia",
    "Check-in closes 45 minutes before departure.",
    "The hike to the summit takes about six hours round trip.",
    "Is tap water safe to drink in Mexico City?",
    # Cooking
    "Preheat the oven to 200 °C and line a tray with baking paper.",
    "Can I substitute Greek yogurt for sour cream?",
    "Sear the steak for two minutes on each side, then let it rest.",
    "How do you keep avocados from turning brown?",
    "Add a pinch of salt to bring out the sweetness.",
    "The crème brûlée needs to chill for at least four hours.",
    "Soak the chickpeas overnight before cooking them.",
    # Sports
    "The quarterback threw three touchdowns in the second half.",
    "Who holds the world record for the 100 metres?",
    "She qualified for the Olympics in the 400 m hurdles.",
    "The referee showed a red card in the 87th minute.",
    "The climb up Alpe d'Huez has 21 hairpin bends.",
    "lakers vs celtics score",
    # Science
    "Electrons carry a negative charge.",
    "The James Webb Space Telescope observes mainly in the infrared.",
    "Mitochondria produce most of the cell's energy.",
    "Sound travels faster in water than in air.",
    "What causes the northern lights?",
    "The entropy of an isolated system never decreases.",
    "Tardigrades can survive in the vacuum of space.",
    # Casual chat
    "lol that's hilarious",
    "Are we still on for lunch tomorrow?",
    "I can't believe it's already December.",
    "omg did you see the finale last night??",
    "Sorry, running 10 min late!",
    "Happy birthday! Hope you have an amazing day 🎉",
    "What are you up to this weekend?",
    "I'm so tired, I could sleep for a week.",
    "Let me know when you get home safe.",
    "Can't wait for the holidays 😍🎄",
    # Very short
    "Thanks!",
    "Good night.",
    "Yes.",
    "No idea.",
    "See you soon.",
    "Hello",
    "OK, sounds good.",
    "Help!",
    "Why not?",
    "Cheers 🍻",
    # Numbers, dates, URLs, emails
    "Please contact support@example.com for a refund.",
    "The meeting is on 2024-03-15 at 14:00 UTC.",
    "See https://docs.python.org/3/library/asyncio.html for details.",
    "Call us at +1 (555) 123-4567, Monday to Friday.",
    "Order #A-99812 shipped on 12/05/2023 via DHL.",
    "The population of the city grew from 1.2 million in 1990 to 3.4 million in 2020.",
    "Version 3.11.4 fixes CVE-2023-24329.",
    "Download the report at www.example.org/reports/q3-2023.pdf",
    "My flight LH 454 departs at 21:35 from gate B22.",
    # Non-ASCII
    "We had a lovely café au lait in a small bistro near the Seine.",
    "José and Zoë moved to São Paulo last year.",
    "The naïve approach runs in O(n²) time.",
    "Temperatures will drop to −5 °C overnight.",
    "Loved the Müller-Thurgau wine we tried in Köln 🍷",
    "The résumé template is free to download.",
    "Price: ¥3,000 per person, tax included.",
    # Typos, lowercase, no punctuation
    "how do i get rid of fruit flys in my kitchen",
    "recieved the package but its the wrong colour",
    "whats the weather like in london tommorow",
    "my laptop wont turn on after the update pls help",
    "definately recommend this place the staff were super freindly",
    "need a plumber asap kitchen sink is leaking everywhere",
    # Long (35-60 words)
    "After upgrading the database server to the new major version, we noticed that several nightly reports took twice as long to finish, and it turned out that the query planner had stopped using the composite index on the orders table because the statistics had not been refreshed.",
    "I ordered the standing desk three weeks ago, and while assembly took almost two hours because the instructions were confusing, the motor is quiet, the height memory buttons work perfectly, and my back pain has noticeably improved since I started alternating between sitting and standing.",
    "If you experience sudden numbness in the face, arm or leg, especially on one side of the body, along with confusion, trouble speaking or difficulty walking, call emergency services immediately, because these can be signs of a stroke and early treatment greatly improves recovery.",
    "The landlord agreed to return the full security deposit within thirty days, provided that the apartment is left in the same condition as when the lease began, apart from normal wear and tear, and that all keys and parking permits are handed back on the final day.",
    "Before you start the recipe, make sure the butter and eggs are at room temperature, because cold ingredients do not blend evenly, and the cake may rise unevenly and end up dense in the middle instead of light and fluffy like the one in the picture.",
    "Our team spent the whole sprint tracking down an intermittent timeout in the checkout service, and in the end the cause was a connection pool that was too small for the traffic spike that happens every evening when customers in three time zones start shopping at once.",
    "The expedition left base camp at two in the morning, climbed through the icefall by headlamp and reached the summit just after sunrise, but a sudden change in the weather forced them to descend quickly, and two climbers suffered mild frostbite on the way down.",
    "Economists expect inflation to keep easing through the second half of the year as energy prices stabilise and supply chains recover, although wage growth in the service sector remains strong and could keep core prices higher for longer than central banks would like.",
    "hey so i was thinking maybe we could skip the restaurant tonight and just order takeout and watch a movie at home instead because honestly im exhausted after this week and i dont really feel like getting dressed up and going out in the rain",
    "The new telescope will be built on a remote mountain in northern Chile, where the dry air and dark skies allow astronomers to observe faint galaxies billions of light-years away, and it is expected to collect its first images before the end of the decade.",
]

# A small retrieval set: RETRIEVAL_QUERIES[i] is best answered by RETRIEVAL_DOCUMENTS[i]. Neighbouring
# documents come in close pairs on purpose (Python packaging, knee injuries, trains in Japan, ...), so
# each query has a near-miss distractor and only a model that captures meaning ranks the right one first.
RETRIEVAL_DOCUMENTS: list[str] = [
    # 0-1: Python packaging
    "A modern Python project describes its metadata, dependencies and build backend in a pyproject.toml file. "
    "Running `python -m build` then produces a source distribution and a wheel in the dist/ folder.",
    "To publish a package on PyPI, create an API token in your account settings and upload the files from dist/ "
    "with `twine upload`. Try it on TestPyPI first, because a released version number can never be reused.",
    # 2-3: knee injuries
    "A torn anterior cruciate ligament usually happens when an athlete pivots or lands awkwardly, often with a "
    "loud pop and rapid swelling. People who want to return to cutting sports often need reconstruction surgery "
    "followed by months of physiotherapy.",
    "The meniscus is a C-shaped cartilage cushion in the knee that can tear when you twist while squatting. "
    "Typical signs are pain along the joint line, clicking, and the knee locking or catching; small tears often "
    "heal with rest and exercises.",
    # 4-5: train travel in Japan
    "The Japan Rail Pass gives foreign tourists unlimited travel on most JR trains, including most Shinkansen "
    "lines, for 7, 14 or 21 days. It pays off mainly for long-distance itineraries such as Tokyo to Kyoto and "
    "Hiroshima and back.",
    "On the Tokaido Shinkansen, suitcases whose three dimensions add up to more than 160 cm need a reserved seat "
    "with an oversized luggage area. Passengers who bring such a bag without a reservation pay an extra fee on board.",
    # 6-7: bread
    "A sourdough starter is a mix of flour and water colonised by wild yeast and bacteria. Feed it equal weights "
    "of flour and water once a day at room temperature, or once a week if you keep it in the fridge.",
    "If your bread dough does not rise, the yeast may be expired or the water may have been hot enough to kill "
    "it. A cold kitchen also slows fermentation, so leave the bowl somewhere warm for longer.",
    # 8-9: mortgages
    "With a fixed-rate mortgage, the interest rate and monthly payment stay the same for the whole term. An "
    "adjustable-rate mortgage starts with a lower rate that can later rise or fall with market interest rates.",
    "Paying extra toward your mortgage principal shortens the loan and reduces the total interest you pay. Check "
    "your contract first, because some lenders charge a prepayment penalty if you pay off the loan early.",
    # 10-11: Git
    "To undo your last Git commit but keep the changes in your working tree, run `git reset --soft HEAD~1`. If "
    "the commit was already pushed to a shared branch, use `git revert` instead so that you don't rewrite history.",
    "A merge conflict happens when two branches change the same lines of a file. Git marks the competing "
    "versions with <<<<<<< and >>>>>>>; edit the file to keep the right code, then stage it and commit the merge.",
    # 12-13: dogs
    "To house-train a puppy, take it outside right after it wakes up, eats or plays, and praise it immediately "
    "when it goes in the right spot. Most puppies can hold their bladder for about one hour per month of age.",
    "Dogs with separation anxiety may howl, chew doors or have accidents when left alone. Practise short "
    "departures that slowly get longer, and give the dog a puzzle toy so that your leaving predicts something "
    "pleasant.",
    # 14-15: home solar power
    "Solar panels still produce electricity in winter, though short days and a low sun reduce output. Cold "
    "temperatures actually make photovoltaic cells slightly more efficient, and snow usually slides off tilted panels.",
    "A home battery stores surplus solar power during the day so you can use it in the evening instead of buying "
    "electricity from the grid. Some systems also keep essential circuits running during a power cut.",
    # 16-17: sleep
    "To recover from jet lag faster, switch to the local schedule as soon as you arrive, get bright daylight in "
    "the morning and avoid long naps. Flying east is usually harder on the body than flying west.",
    "People who struggle to fall asleep are advised to keep a regular wake-up time, keep the bedroom cool and "
    "dark, and avoid caffeine after midday. If you lie awake for more than twenty minutes, get up and do "
    "something calm until you feel sleepy.",
    # 18-19: the ocean
    "Ocean tides are caused mainly by the Moon's gravity pulling on the Earth's oceans. Most coastlines see two "
    "high tides and two low tides roughly every 24 hours and 50 minutes.",
    "When sea temperatures stay too high, corals expel the colourful algae living in their tissues and turn "
    "white. Bleached corals are not dead yet, but they starve if the water does not cool down within a few weeks.",
    # 20: personal finance
    "Your credit score depends mostly on whether you pay bills on time and how much of your available credit you "
    "use. Keeping card balances below about 30 percent of the limit and avoiding many new applications helps it rise.",
    # 21-23: gardening
    "A compost heap needs a balance of green material such as vegetable scraps and brown material such as dry "
    "leaves or cardboard. Turn it every few weeks to let in air; a bad smell usually means it is too wet.",
    "Yellow leaves and soggy soil are classic signs that a houseplant is being overwatered. Let the top few "
    "centimetres of soil dry out between waterings and make sure the pot has drainage holes.",
    "Tomato plants need at least six hours of direct sun a day and deep, regular watering. Uneven watering can "
    "cause blossom end rot, a dark sunken patch at the bottom of the fruit.",
    # 24-26: software infrastructure
    "A container shares the host operating system's kernel and packages only the application and its libraries, "
    "so it starts in seconds. A virtual machine emulates complete hardware and runs its own operating system, "
    "which makes it heavier but more isolated.",
    "A database index lets the engine find matching rows without scanning the whole table, much like the index "
    "at the back of a book. Indexes speed up reads but make inserts and updates slower and use extra disk space.",
    "The Cache-Control response header tells browsers and CDNs how long they may reuse a copy of a resource. "
    "For example, `Cache-Control: max-age=3600` lets a cached file be served for one hour without asking the server.",
    # 27-28: online security
    "Phishing emails imitate banks, delivery companies or colleagues to trick you into entering a password or "
    "opening an attachment. Check the real sender address, hover over links before clicking, and never share "
    "one-time codes.",
    "A password manager generates a long random password for every website and stores them in an encrypted "
    "vault. You then only need to remember one strong master password, ideally protected with two-factor "
    "authentication.",
    # 29-30: cars
    "Charging an electric car from a standard wall socket can take more than a day for a full battery, while a "
    "dedicated 11 kW wall box needs about six to eight hours. Public DC fast chargers can add 80 percent in "
    "around half an hour.",
    "Check your car's tyre pressure once a month while the tyres are cold; the recommended values are usually "
    "printed on a sticker inside the driver's door. Under-inflated tyres wear faster and increase fuel consumption.",
    # 31: travel documents
    "Many countries recommend renewing a passport at least nine months before it expires, since some "
    "destinations require six months of validity on arrival. Standard processing can take several weeks.",
    # 32-33: sport and games
    "In the two to three weeks before a marathon, runners reduce their weekly mileage while keeping some short, "
    "fast sessions. This taper lets the legs recover fully so that you start the race fresh rather than tired.",
    "The Sicilian Defence begins 1.e4 c5 and is Black's most popular reply to the king's pawn opening. It "
    "creates an unbalanced position in which Black fights for the centre from the side.",
    # 34-35: history and geology
    "Roman aqueducts carried fresh water into cities using only gravity, through channels that dropped by a tiny, "
    "carefully measured slope over many kilometres. The Pont du Gard in southern France is a well-preserved example.",
    "Shield volcanoes such as those in Hawaii are built by runny basaltic lava and have gentle slopes. "
    "Stratovolcanoes like Mount Fuji are steeper and erupt more explosively, because their thicker magma traps gas.",
    # 36-37: science
    "Vaccines train the immune system by showing it a harmless piece or a weakened form of a pathogen. If the "
    "real germ appears later, memory cells recognise it and the body responds faster and more strongly.",
    "A black hole forms when a massive star collapses under its own gravity at the end of its life. Beyond the "
    "event horizon its gravity is so strong that nothing, not even light, can escape.",
    # 38-39: learning
    "Spaced repetition apps show you a flashcard again just before you are likely to forget it. Reviewing "
    "vocabulary at growing intervals moves it into long-term memory with far less total study time.",
    "In standard tuning, the six guitar strings from lowest to highest are E, A, D, G, B and E. A clip-on tuner "
    "reads the vibration directly from the headstock, so it works even in a noisy room.",
]

RETRIEVAL_QUERIES: list[str] = [
    "Where do I list my project's dependencies, and how do I build a wheel?",
    "How do I publish my Python package on PyPI?",
    "I heard a pop in my knee when I landed from a jump and it swelled right away. Is that a torn ligament?",
    "My knee keeps clicking and locking after I twisted it while squatting. Is that a meniscus tear?",
    "Is there an unlimited train ticket for tourists visiting Japan?",
    "Do I need to book a special seat for a big suitcase on the bullet train?",
    "How often should I feed my sourdough starter?",
    "Why didn't my bread dough rise?",
    "What's the difference between a fixed and an adjustable rate mortgage?",
    "Is it worth paying off my home loan early?",
    "How do I undo my last git commit without losing my changes?",
    "How do I resolve a merge conflict in Git?",
    "How do I potty train my new puppy?",
    "How do I help a dog that panics when left home alone?",
    "Do solar panels still work when it's cold and snowy?",
    "Can I store my solar power to use at night?",
    "How can I get over jet lag quickly after a long flight?",
    "What can I do if I can't fall asleep at night?",
    "Why are there two high tides every day?",
    "Why do coral reefs turn white?",
    "How can I improve my credit score?",
    "My compost pile smells bad. What am I doing wrong?",
    "Why are the leaves on my indoor plant turning yellow?",
    "Why are my tomatoes rotting at the bottom?",
    "What is the difference between a Docker container and a virtual machine?",
    "Why does adding an index make SQL queries faster?",
    "Which HTTP header controls how long a browser caches a file?",
    "How can I tell if an email is a scam trying to steal my login?",
    "Is it a good idea to use a password manager?",
    "How long does it take to charge an electric car?",
    "How often should I check the air pressure in my car tyres?",
    "How early should I renew my passport before an international trip?",
    "Should I run less in the weeks before my marathon?",
    "What is the Sicilian Defence in chess?",
    "How did the Romans bring water into their cities?",
    "Why do some volcanoes explode while others have gentle lava flows?",
    "How do vaccines protect you from disease?",
    "How is a black hole formed?",
    "What's the best way to memorise vocabulary in a new language?",
    "What notes are the guitar strings tuned to in standard tuning?",
]


def _check_unique() -> None:
    """Every built-in sentence is non-empty and appears once across all lists (cheap; runs at import)."""
    lists = {"PARAPHRASE_PAIRS": [s for pair in PARAPHRASE_PAIRS for s in pair], "_OTHER_SENTENCES": _OTHER_SENTENCES,
             "CALIBRATION_SENTENCES": CALIBRATION_SENTENCES, "RETRIEVAL_QUERIES": RETRIEVAL_QUERIES,
             "RETRIEVAL_DOCUMENTS": RETRIEVAL_DOCUMENTS}
    if len(RETRIEVAL_QUERIES) != len(RETRIEVAL_DOCUMENTS):
        raise ValueError(f"RETRIEVAL_QUERIES ({len(RETRIEVAL_QUERIES)}) and RETRIEVAL_DOCUMENTS "
                         f"({len(RETRIEVAL_DOCUMENTS)}) must pair up one to one")
    seen: dict[str, str] = {}
    for name, sentences in lists.items():
        for sentence in sentences:
            if not sentence.strip():
                raise ValueError(f"empty sentence in {name}")
            if sentence in seen:
                raise ValueError(f"duplicate sentence in {name} (already in {seen[sentence]}): {sentence!r}")
            seen[sentence] = name


_check_unique()

"""Natural-language content for the isolation probes' planted documents.

Every planted document gets a topic of its own (a short statement and a question that
paraphrases it), so a foreign document's text is never close in meaning to any of the
caller's documents: a grounding check of a foreign text must then not come out
`supported`, and a paraphrased question finds only the document it paraphrases. No
topic names a person (a NER model would redact it) or carries long digit runs.
"""

from __future__ import annotations

#: (statement, paraphrased question) pairs, each on a distinct subject.
TOPICS: tuple[tuple[str, str], ...] = (
    (
        "Honeybees tell their sisters where flowers are through a waggle dance inside the "
        "hive. The angle of the dance points toward the food relative to the sun.",
        "How do bees show each other the way to a patch of blossoms?",
    ),
    (
        "Most of the surviving Great Wall dates from the Ming era. It was built over many "
        "dynasties to guard against raids from the northern steppe.",
        "Which dynasty is responsible for the remaining parts of the Chinese wall?",
    ),
    (
        "Sourdough rises thanks to a starter of wild yeast and lactic acid bacteria. The "
        "bacteria give the crumb its sour taste.",
        "What makes a naturally leavened loaf rise and taste tangy?",
    ),
    (
        "Emperor penguins huddle in dense groups to survive the Antarctic winter wind. Birds "
        "take turns standing on the cold outer edge of the huddle.",
        "How do penguins keep from freezing during the polar winter?",
    ),
    (
        "A bicycle chain carries the force of the pedals to the rear wheel over a set of "
        "sprockets. Shifting gears moves the chain onto a sprocket of another size.",
        "What actually happens when a cyclist changes gear?",
    ),
    (
        "Green leaves turn sunlight, water and carbon dioxide into sugar and oxygen. "
        "Chlorophyll absorbs mostly red and blue light and reflects green.",
        "How do plants make their food out of light?",
    ),
    (
        "A violin has four strings tuned in fifths and is played with a horsehair bow. Rosin "
        "rubbed on the bow helps the hair grip the strings.",
        "Why do fiddle players rub resin on their bows?",
    ),
    (
        "Volcanic eruptions throw lava, ash and sulfur dioxide into the atmosphere. A large "
        "eruption can cool the global climate for a year or two.",
        "Can an erupting volcano change the weather around the world?",
    ),
    (
        "Chess openings such as the Sicilian Defence have been analysed for centuries. Strong "
        "players memorise long sequences of opening moves.",
        "Why do chess masters study the first moves of a game so closely?",
    ),
    (
        "Reef-building corals are tiny animals that secrete limestone skeletons. Water that "
        "is too warm makes them expel their algae and bleach.",
        "What causes coral reefs to turn white?",
    ),
    (
        "Roman aqueducts carried water into cities along a gentle downhill slope. Some of "
        "their arches still stand after two thousand years.",
        "How did the ancient Romans bring fresh water to their towns?",
    ),
    (
        "Espresso is brewed by forcing hot water through finely ground coffee at high "
        "pressure. A good shot is topped by a layer of golden crema.",
        "How is a short strong Italian coffee prepared?",
    ),
    (
        "Glaciers carve U-shaped valleys as they grind slowly over the bedrock. When they melt "
        "they leave ridges of rubble called moraines.",
        "What marks do moving ice sheets leave on a landscape?",
    ),
    (
        "Solar panels turn sunlight into electricity in thin layers of silicon. Their output "
        "drops on cloudy days and stops at night.",
        "How do photovoltaic modules produce power?",
    ),
    (
        "Tea bushes grow best on misty hillsides in warm climates. Green and black tea come "
        "from the same leaves, processed in different ways.",
        "Are green and black teas made from different plants?",
    ),
    (
        "Lighthouses warn ships of rocks and headlands with a rotating beam. Each one flashes "
        "in its own rhythm so that sailors can tell them apart.",
        "How can a navigator recognise one coastal beacon from another?",
    ),
    (
        "Marathon runners build up their weekly distance slowly over many months. Loading up "
        "on carbohydrates before the race fills the muscles with glycogen.",
        "How do long distance runners prepare their bodies for race day?",
    ),
    (
        "Origami is the Japanese art of folding one sheet of paper into a figure without "
        "cutting it. The folded crane is its best known model.",
        "What is the best known figure of the Japanese paper folding craft?",
    ),
    (
        "Earthquakes happen when tectonic plates slip suddenly along a fault. Seismographs "
        "record the waves that travel through the ground.",
        "Which instrument records the ground shaking during a quake?",
    ),
    (
        "The Amazon rainforest makes much of its own rain through water evaporating from its "
        "trees. Clearing the forest breaks this water cycle.",
        "Why does logging in the Amazon reduce rainfall there?",
    ),
    (
        "A submarine dives by flooding its ballast tanks with sea water. It surfaces by "
        "blowing the water out with compressed air.",
        "How does an underwater boat go down and come back up?",
    ),
    (
        "Cheese is made by curdling milk with rennet and draining off the whey. Hard cheeses "
        "are pressed and then aged for months.",
        "How are aged hard cheeses produced from milk?",
    ),
    (
        "The northern lights appear when charged particles from the sun strike gases high in "
        "the atmosphere. Oxygen glows green and nitrogen glows purple.",
        "What makes the aurora shine in different colours?",
    ),
    (
        "Beavers build dams of branches and mud across streams. The pond behind the dam "
        "protects the entrance of their lodge from predators.",
        "Why do beavers block streams with sticks?",
    ),
    (
        "A sundial tells the time from the shadow of a pointer called a gnomon. It has to be "
        "aligned with true north to be accurate.",
        "How does a shadow clock in a garden show the hour?",
    ),
    (
        "Vaccines train the immune system with a harmless piece or copy of a germ. Memory "
        "cells then respond quickly when the real infection arrives.",
        "How do immunisations protect the body against disease?",
    ),
    (
        "A piano makes its sound when felt hammers strike steel strings. Its pedals sustain "
        "or soften the notes.",
        "What happens inside a piano when a key is pressed?",
    ),
    (
        "Salt marshes protect coastlines by soaking up the energy of storm waves. They are "
        "also nurseries for young fish.",
        "Why are coastal wetlands valuable when storms hit?",
    ),
    (
        "Hot air balloons rise because the heated air in the envelope is lighter than the "
        "cooler air around it. Pilots steer by climbing or sinking into different winds.",
        "How does a balloon pilot choose a direction?",
    ),
    (
        "Silk is spun by silkworm caterpillars that wrap themselves in cocoons. A single "
        "cocoon can yield a thread hundreds of metres long.",
        "Where does natural silk thread come from?",
    ),
    (
        "Compound interest pays interest on earlier interest as well as on the first deposit. "
        "Over decades small savings grow large.",
        "Why do savings grow faster the longer they are left alone?",
    ),
    (
        "Monarch butterflies migrate thousands of kilometres every autumn from Canada to the "
        "mountain forests of central Mexico.",
        "Where do monarch butterflies spend the winter?",
    ),
    (
        "The printing press with movable metal type spread books across Europe in the "
        "fifteenth century and made them far cheaper.",
        "Which invention made books affordable at the end of the Middle Ages?",
    ),
    (
        "Wind turbines turn the motion of the air into electricity with a generator housed in "
        "the nacelle at the top of the tower.",
        "How do wind farms generate electric power?",
    ),
    (
        "Olive oil is pressed from ripe olives. Extra virgin oil comes from the first cold "
        "pressing, without heat or solvents.",
        "What does the label extra virgin mean on a bottle of olive oil?",
    ),
    (
        "An octopus can change the colour and texture of its skin in a fraction of a second "
        "to hide from predators.",
        "How do octopuses camouflage themselves so quickly?",
    ),
    (
        "The Panama Canal lifts ships over the isthmus with a series of locks fed by a large "
        "artificial lake.",
        "How do ships cross from the Atlantic to the Pacific through Central America?",
    ),
    (
        "Sauerkraut and kimchi are cabbage preserved by lactic acid bacteria. The acid keeps "
        "spoilage microbes away for months.",
        "How does fermentation keep cabbage from going bad?",
    ),
    (
        "Telescopes with larger mirrors gather more light. They can therefore see fainter and "
        "more distant galaxies.",
        "Why do astronomers build telescopes with enormous mirrors?",
    ),
    (
        "Rice paddies are flooded to keep weeds down and to suit the water-loving rice plant.",
        "Why are rice fields kept under a layer of water?",
    ),
    (
        "Spiders weave webs from protein threads that are tougher than steel of the same "
        "thickness.",
        "How strong is the thread of a spider web compared with metal?",
    ),
    (
        "During a lunar eclipse the Earth passes between the sun and the moon. Light bent by "
        "our atmosphere turns the moon a coppery red.",
        "Why does the moon look red during an eclipse?",
    ),
    (
        "Mountaineers get used to thin air by spending days at intermediate camps before they "
        "push for the summit.",
        "How do climbers adjust their bodies to high altitude?",
    ),
    (
        "Bamboo is a giant grass. Some species grow almost a metre in a single day.",
        "Which plant grows fastest of all?",
    ),
    (
        "Bats find insects in the dark by echolocation: they listen to the echoes of their own "
        "high pitched calls.",
        "How do bats catch prey at night without seeing it?",
    ),
    (
        "A sailing boat can travel against the wind by tacking along a zigzag course.",
        "How can a sailboat make progress upwind?",
    ),
    (
        "Maple syrup is made by boiling down the sap of sugar maples, collected in early "
        "spring when nights are still frosty.",
        "How is maple syrup produced from trees?",
    ),
    (
        "The Dead Sea is so salty that swimmers float on its surface without any effort.",
        "Why do bathers float so easily in the Dead Sea?",
    ),
    (
        "Elephants keep in touch over long distances with low rumbles below the range of "
        "human hearing.",
        "How do elephants talk to each other across the savanna?",
    ),
    (
        "Crossword puzzles first appeared in a New York newspaper shortly before the First "
        "World War.",
        "When was the first crossword printed?",
    ),
    (
        "Stained glass gets its colours from metal oxides stirred into the molten glass.",
        "What gives cathedral window glass its colours?",
    ),
    (
        "Ocean tides are caused mainly by the pull of the moon's gravity on the seas.",
        "What makes the sea rise and fall twice a day?",
    ),
    (
        "Merino wool is fine and soft, and it keeps its wearer warm even when it is wet.",
        "Why is merino a good fibre for outdoor clothing?",
    ),
    (
        "The Rosetta Stone carries the same decree in three scripts, which let scholars "
        "decipher Egyptian hieroglyphs.",
        "How were the hieroglyphs of ancient Egypt decoded?",
    ),
    (
        "Radiocarbon dating measures how much carbon fourteen has decayed to estimate the age "
        "of ancient remains.",
        "How do archaeologists work out the age of old bones?",
    ),
    (
        "Hummingbirds beat their wings dozens of times a second and can even fly backwards.",
        "Which bird can hover in place and fly in reverse?",
    ),
    (
        "Chocolate is made from roasted cacao beans ground together with sugar and cocoa butter.",
        "What goes into a bar of chocolate?",
    ),
    (
        "A rainbow forms when sunlight is bent and reflected inside raindrops, which splits it "
        "into its colours.",
        "Why does a rainbow appear after a shower?",
    ),
    (
        "Camels store fat in their humps and can go for many days without drinking.",
        "How do camels survive long journeys through the desert?",
    ),
    (
        "The Eiffel Tower was built for the world's fair in Paris and was at first mocked by "
        "many artists of the city.",
        "Why was the iron tower in Paris put up?",
    ),
    (
        "Snowflakes grow as six-sided crystals because of the way water molecules bond as "
        "they freeze.",
        "Why do snow crystals have six arms?",
    ),
    (
        "Pottery is hardened by firing the shaped clay in a kiln at more than a thousand degrees.",
        "How does soft clay turn into hard ceramic?",
    ),
    (
        "Morse code spells letters with short and long signals and carried telegraph messages "
        "across continents.",
        "How were telegraph messages encoded?",
    ),
    (
        "Salmon return from the ocean to the very river where they hatched in order to spawn.",
        "Why do salmon swim upstream every year?",
    ),
    (
        "Cotton fibres grow around the seeds of the cotton plant and are spun into yarn.",
        "Where do cotton threads come from?",
    ),
    (
        "The Sahara was green with lakes and grassland about six thousand years ago.",
        "Was the Sahara always a desert?",
    ),
    (
        "Jellyfish have no brain, no heart and no bones; their bodies are mostly water.",
        "What is the body of a jellyfish made of?",
    ),
    (
        "Fireworks get their colours from metal salts: strontium burns red and copper burns blue.",
        "Which chemicals give fireworks their colours?",
    ),
    (
        "A lichen is a partnership between a fungus and an alga, and it can grow on bare rock.",
        "Which organisms make up a lichen?",
    ),
    (
        "Kites were flown in ancient China to send military signals and to measure distances.",
        "What were the earliest kites used for?",
    ),
    (
        "A pendulum clock keeps time because every swing of its pendulum takes the same interval.",
        "Why does a swinging weight keep accurate time?",
    ),
    (
        "Icebergs float because frozen water is less dense than sea water, so most of their "
        "bulk stays hidden below the surface.",
        "Why is most of an iceberg under water?",
    ),
    (
        "Mushrooms are the fruiting bodies of fungi whose threads spread unseen through soil "
        "and rotting wood.",
        "What part of a fungus is the mushroom we pick?",
    ),
    (
        "Gliders stay aloft without an engine by circling in rising columns of warm air called "
        "thermals.",
        "How do engineless aircraft stay in the air for hours?",
    ),
    (
        "Honey keeps for years because its low water content and acidity stop microbes from "
        "growing.",
        "Why does honey not spoil?",
    ),
    (
        "Owls fly almost silently thanks to soft fringes on the edges of their wing feathers.",
        "How can owls fly without making a sound?",
    ),
    (
        "Granite forms when magma cools slowly deep underground, giving it large visible crystals.",
        "Why does granite have such big crystals?",
    ),
    (
        "Tulips were so prized in the Dutch Golden Age that single bulbs sold for the price of "
        "a house.",
        "Why were tulip bulbs once worth a fortune in Holland?",
    ),
    (
        "Sea turtles navigate across whole oceans using the Earth's magnetic field.",
        "How do sea turtles find their way across the ocean?",
    ),
)

"""Generate framekit's bundled sample dataset: ``framekit/data/sample_rag.parquet``.

The dataset is a simulated RAG evaluation run: 100 questions about five everyday topics,
each answered twice, once per retrieval strategy ("bm25" and "dense"). Every passage,
question and answer below was written for framekit; nothing is copied from elsewhere.

Ground truth is decided by a seeded RNG, so the output is byte-for-byte reproducible:

- retrieval: "dense" finds a gold passage for exactly 80 % of the questions, "bm25" for 55 %;
- answers: mostly grounded and correct, some off-topic, noncommittal or incoherent, a few
  long-winded; a row whose retrieval missed gets a worse answer more often;
- about a quarter of the questions come with earlier turns (``history``), a few of them
  follow-ups that only make sense with that history;
- each question has a reference (gold) answer (``reference``), for ContextRecall.

Run ``python scripts/make_sample.py`` (optionally ``--out PATH``) to rewrite the file.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path
from typing import NamedTuple

import polars as pl

SEED = 20240611
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "framekit" / "data" / "sample_rag.parquet"

# Exact counts rather than per-row coin flips: the documented rates then hold exactly.
HIT_RATES = {"bm25": 0.55, "dense": 0.80}
# When retrieval misses, a retriever still returns *something*; dense misses are mostly
# near misses from the same topic, bm25 misses are more often unrelated keyword matches.
SAME_TOPIC_DISTRACTOR = {"bm25": 0.5, "dense": 0.7}
# Probability that both gold passages are retrieved, for questions with two of them.
BOTH_GOLD = {"bm25": 0.4, "dense": 0.7}
# Answer quality given whether retrieval found the gold passage.
QUALITY_WEIGHTS = {
    True: {"good": 0.80, "off_topic": 0.05, "noncommittal": 0.07, "incoherent": 0.08},
    False: {"good": 0.30, "off_topic": 0.35, "noncommittal": 0.25, "incoherent": 0.10},
}
LONG_ANSWER_RATE = 0.12  # share of good answers padded into long, rambling ones
HISTORY_RATE = 0.25  # share of questions with earlier turns (follow-ups included)
TOOL_CALL_HISTORIES = 5  # how many of those histories show a tool call

TOPIC_NAMES = {
    "compost": "home composting",
    "bike": "bicycle maintenance",
    "bread": "bread baking",
    "plant": "houseplants",
    "acme": "Acme Cloud Storage",
}

PASSAGES: dict[str, str] = {
    # Home composting
    "compost-1": "A home compost pile needs a mix of greens and browns. Greens are nitrogen-rich materials such as vegetable scraps, coffee grounds and fresh grass clippings; browns are carbon-rich materials such as dry leaves, straw and shredded cardboard.",
    "compost-2": "A good starting ratio is roughly three parts browns to one part greens by volume. Too many greens make the pile wet and smelly, while too many browns slow decomposition down.",
    "compost-3": "Turning the pile every one to two weeks adds oxygen, which the microbes need to break material down quickly. An unturned pile still composts, but it can take a year or more instead of two to three months.",
    "compost-4": "A compost pile should feel as damp as a wrung-out sponge. If it is dry, sprinkle it with water while turning; if it is soggy, mix in more browns.",
    "compost-5": "Meat, fish, dairy, oily food and pet waste should be kept out of a home compost pile. They attract rodents and flies and can carry pathogens that a backyard pile may not get hot enough to kill.",
    "compost-6": "An active compost pile heats up to between 55 and 65 °C in its core within a few days. A pile smaller than about one cubic metre often loses heat too quickly to reach these temperatures.",
    "compost-7": "A rotten-egg or ammonia smell usually means the compost is too wet or has too many greens and not enough air. Turning the pile and adding dry browns normally fixes the odour within a few days.",
    "compost-8": "Compost is finished when it is dark, crumbly and smells like forest soil, and the original materials are no longer recognisable. Screening it through a 1 cm mesh removes lumps, which can go back into a new pile.",
    "compost-9": "Worm composting, or vermicomposting, uses red wiggler worms in a bin kept indoors or in a shaded spot. It suits apartments because the bin is small and does not smell as long as the worms are not overfed.",
    # Bicycle maintenance
    "bike-1": "Most road bike tyres run at 80 to 100 psi and most mountain bike tyres at 25 to 35 psi; the exact range is printed on the tyre sidewall. Tyres lose pressure slowly, so checking it weekly is a good habit.",
    "bike-2": "A bicycle chain should be cleaned and lubricated about every 150 to 300 km, or after any wet ride. Apply one drop of lubricant per link on the inside of the chain, then wipe off the excess so it does not attract grit.",
    "bike-3": "A chain wears as its pins and rollers wear, which is often called chain stretch. A chain checker shows when wear reaches 0.5 % on 11- and 12-speed drivetrains or 0.75 % on others; the chain should then be replaced before it wears out the cassette.",
    "bike-4": "Rim brake pads have wear grooves, and once the grooves are gone the pads need replacing. Disc brake pads should be replaced when the friction material is thinner than about 0.5 mm.",
    "bike-5": "To fix a puncture, remove the wheel, lever one side of the tyre off the rim and pull out the tube. Find and remove whatever caused the puncture inside the tyre before fitting a patched or new tube, otherwise it will puncture again.",
    "bike-6": "Squealing disc brakes are often caused by contaminated pads or rotors, for example from chain lubricant or cleaning spray. Clean the rotor with isopropyl alcohol; pads soaked in oil usually have to be replaced.",
    "bike-7": "Saddle height is about right when your leg is almost straight, with a slight bend at the knee, while the pedal is at the bottom of its stroke. A saddle that is too low strains the knees.",
    "bike-8": "If the gears skip or shift slowly, the cable tension is usually off. Turning the barrel adjuster on the rear derailleur a quarter turn at a time, anticlockwise to move the chain toward larger cogs, usually fixes it.",
    "bike-9": "A basic home toolkit for bicycle maintenance includes tyre levers, a pump with a pressure gauge, hex keys from 2 to 8 mm, a chain tool and chain lubricant.",
    # Bread baking
    "bread-1": "Basic bread dough is made from flour, water, salt and yeast. A common starting point is 500 g of flour, 325 g of water, 10 g of salt and 7 g of instant yeast.",
    "bread-2": "Kneading develops gluten, the protein network that traps gas and lets bread rise. Dough is kneaded enough when it is smooth and stretches thin enough to let light through without tearing, which is known as the windowpane test.",
    "bread-3": "The first rise, or bulk fermentation, usually takes 1 to 2 hours at room temperature, until the dough has roughly doubled in size. In a cold kitchen it can take much longer.",
    "bread-4": "A sourdough starter is a mixture of flour and water that hosts wild yeast and lactic acid bacteria. It is fed with equal weights of flour and water, and it is ready to bake with when it reliably doubles within 4 to 8 hours of a feeding.",
    "bread-5": "Bread is fully baked when its internal temperature reaches about 93 to 96 °C, or when the loaf sounds hollow when tapped on the bottom.",
    "bread-6": "A dense, heavy loaf is usually caused by under-proofing, too little kneading, or old yeast that has lost its strength. To test dry yeast, mix it with warm water and a pinch of sugar: it should foam within 10 minutes.",
    "bread-7": "Steam during the first 10 to 15 minutes of baking keeps the crust soft so the loaf can expand, and it gives a shinier, crisper crust. A tray of boiling water on the oven floor or a covered Dutch oven both provide steam.",
    "bread-8": "Salt strengthens gluten, slows fermentation and is essential for flavour. Bread made without salt rises faster but tastes flat and has a weaker structure.",
    "bread-9": "Bread keeps best at room temperature in a paper or cloth bag for two to three days. The refrigerator makes bread go stale faster; for longer storage, slice it and freeze it.",
    # Houseplants
    "plant-1": "Most houseplants should be watered when the top 2 to 3 cm of soil feel dry. Watering on a fixed schedule regardless of the soil is a common cause of overwatering.",
    "plant-2": "Yellowing lower leaves together with soggy soil usually indicate overwatering, which starves roots of oxygen and can lead to root rot. Let the soil dry out and make sure the pot has drainage holes.",
    "plant-3": "Succulents and cacti store water in their leaves and stems and need bright light and little water: water them thoroughly, then wait until the soil is completely dry. In winter, once a month is often enough.",
    "plant-4": "Snake plants, ZZ plants and pothos tolerate low light well, which makes them good choices for rooms with north-facing windows. No houseplant grows in complete darkness.",
    "plant-5": "Brown, crispy leaf tips are often caused by dry air or by salts from tap water building up in the soil. Grouping plants together, using a pebble tray with water, or flushing the soil thoroughly every few months helps.",
    "plant-6": "Houseplants grow mainly in spring and summer, so that is when they benefit from fertiliser, typically a diluted liquid feed every two to four weeks. Most houseplants need little or no fertiliser in winter.",
    "plant-7": "A plant needs repotting when roots grow out of the drainage holes or circle tightly around the inside of the pot. Move it to a pot only 2 to 5 cm wider, because a much larger pot holds excess wet soil.",
    "plant-8": "Fungus gnats are small flies that breed in constantly moist potting soil. Letting the top layer of soil dry out between waterings and using yellow sticky traps usually brings them under control.",
    "plant-9": "Many common houseplants, including pothos, dieffenbachia and lilies, are toxic to cats and dogs if chewed, and lilies are especially dangerous for cats. Spider plants and calatheas are generally considered safe for pets.",
    # Acme Cloud Storage (a fictional product)
    "acme-1": "Acme Cloud Storage offers three plans: Free with 5 GB, Plus with 200 GB for $2.99 per month, and Pro with 2 TB for $9.99 per month. All plans include file sync, sharing and the mobile apps.",
    "acme-2": "When an Acme account goes over its storage quota, existing files stay available, but new uploads and sync from devices pause until space is freed or the plan is upgraded. Files in the trash count toward the quota.",
    "acme-3": "The Acme desktop app syncs a folder on your computer with your cloud storage, uploading changes in the background. A green check mark means a file is synced, and blue arrows mean sync is in progress.",
    "acme-4": "Deleted Acme files go to the trash and can be restored for 30 days on the Free and Plus plans and for 180 days on the Pro plan. Previous versions of a file are kept for the same period.",
    "acme-5": "You can share an Acme file or folder by creating a link. Plus and Pro users can protect links with a password and set an expiry date; links made on the Free plan are open to anyone who has them.",
    "acme-6": "Acme bills monthly or yearly, and yearly billing costs the same as ten months. You can cancel at any time under Settings > Billing; the plan stays active until the end of the paid period, and partial periods are not refunded.",
    "acme-7": "Acme encrypts files in transit with TLS and at rest with AES-256. Two-factor authentication can be turned on under Settings > Security and is strongly recommended.",
    "acme-8": "The maximum size for a single Acme file is 50 GB when uploaded with the desktop app and 5 GB when uploaded through the web browser.",
    "acme-9": "If Acme sync stops, check that the desktop app is running and signed in, that the account is not over quota, and that file names avoid characters such as : or * that some systems reject. Pausing and resuming sync from the app menu restarts it.",
}


class Question(NamedTuple):
    text: str
    gold: tuple[str, ...]  # ids of the passages that answer it
    answer: str  # a correct answer grounded in the gold passages
    follows: str | None = None  # text of the question this one follows up on


def q(text: str, gold: str, answer: str, follows: str | None = None) -> Question:
    """Shorthand: ``gold`` is a space-separated list of passage ids."""
    return Question(text, tuple(gold.split()), answer, follows)


QUESTIONS: list[Question] = [
    # Home composting
    q(
        "What counts as green and brown material in a compost pile?",
        "compost-1",
        "Greens are nitrogen-rich materials like vegetable scraps, coffee grounds and fresh grass clippings. Browns are carbon-rich materials like dry leaves, straw and shredded cardboard.",
    ),
    q(
        "Can I put dry autumn leaves in my compost?",
        "compost-1",
        "Yes. Dry leaves are a brown, carbon-rich material, and they balance out wet kitchen scraps.",
    ),
    q(
        "What ratio of browns to greens should I use?",
        "compost-2",
        "Start with about three parts browns to one part greens by volume.",
    ),
    q(
        "Why is my compost pile wet and slimy?",
        "compost-2 compost-4",
        "It probably has too many greens. Mix in more browns such as dry leaves or shredded cardboard until it feels like a wrung-out sponge.",
    ),
    q(
        "How often should I turn my compost?",
        "compost-3",
        "Turn it every one to two weeks so the microbes get the oxygen they need to work quickly.",
    ),
    q(
        "How long does compost take to be ready?",
        "compost-3",
        "A pile that is turned every week or two is usually ready in two to three months; an unturned pile can take a year or more.",
    ),
    q(
        "How moist should a compost pile be?",
        "compost-4",
        "About as damp as a wrung-out sponge. Add water while turning if it is dry, or more browns if it is soggy.",
    ),
    q(
        "Can I compost meat or cheese?",
        "compost-5",
        "No. Meat and dairy attract rodents and flies and can carry pathogens that a backyard pile may not get hot enough to kill, so keep them out.",
    ),
    q(
        "Is it okay to put dog poop in the compost bin?",
        "compost-5",
        "No, pet waste should stay out of a home compost pile because it can carry pathogens a backyard pile may not kill.",
    ),
    q(
        "How hot does a compost pile get?",
        "compost-6",
        "An active pile reaches about 55 to 65 °C in its core within a few days.",
    ),
    q(
        "Why isn't my compost heating up?",
        "compost-6",
        "It may be too small: a pile under about one cubic metre often loses heat too fast to get hot.",
    ),
    q(
        "My compost smells like rotten eggs. What should I do?",
        "compost-7",
        "The pile is probably too wet and short of air. Turn it and mix in dry browns; the smell usually goes away within a few days.",
    ),
    q(
        "How do I fix an ammonia smell coming from my compost?",
        "compost-7",
        "An ammonia smell means too many greens. Turn the pile and add dry browns such as leaves or cardboard.",
    ),
    q(
        "How can I tell when compost is finished?",
        "compost-8",
        "It is finished when it is dark and crumbly, smells like forest soil, and you can no longer recognise the original materials.",
    ),
    q(
        "What should I do with lumps left in finished compost?",
        "compost-8",
        "Screen the compost through a 1 cm mesh and put the lumps back into a new pile.",
    ),
    q(
        "Can I compost in an apartment?",
        "compost-9",
        "Yes, with a worm bin. Vermicomposting uses red wiggler worms in a small bin that can be kept indoors.",
    ),
    q("What kind of worms are used for worm composting?", "compost-9", "Red wiggler worms."),
    q(
        "Won't it make my flat smell?",
        "compost-9",
        "Not if you avoid overfeeding the worms; a worm bin that is not overfed does not smell.",
        follows="Can I compost in an apartment?",
    ),
    q(
        "Are coffee grounds good for compost?",
        "compost-1",
        "Yes. Coffee grounds are a nitrogen-rich green material.",
    ),
    q(
        "What is the minimum size for a hot compost pile?",
        "compost-6",
        "Aim for at least about one cubic metre; smaller piles often lose heat too quickly to get hot.",
    ),
    # Bicycle maintenance
    q(
        "What tyre pressure should I use on my road bike?",
        "bike-1",
        "Most road tyres run at 80 to 100 psi. Check the exact range printed on your tyre's sidewall.",
    ),
    q(
        "How often should I check my tyre pressure?",
        "bike-1",
        "Once a week, because tyres slowly lose pressure.",
    ),
    q(
        "And what about a mountain bike?",
        "bike-1",
        "Mountain bike tyres run much lower, usually 25 to 35 psi; the sidewall shows the exact range.",
        follows="What tyre pressure should I use on my road bike?",
    ),
    q(
        "How often should I lube my bike chain?",
        "bike-2",
        "Clean and lubricate it about every 150 to 300 km, and after any wet ride.",
    ),
    q(
        "How do I apply chain lubricant properly?",
        "bike-2",
        "Put one drop on each link on the inside of the chain, then wipe off the excess so it does not pick up grit.",
    ),
    q(
        "When should I replace my bike chain?",
        "bike-3",
        "Replace it when a chain checker shows 0.5 % wear on an 11- or 12-speed drivetrain, or 0.75 % on others, before it wears out the cassette.",
    ),
    q(
        "What is chain stretch?",
        "bike-3",
        "It is the wear of a chain's pins and rollers, which makes the chain effectively longer. A chain checker measures it.",
    ),
    q(
        "How do I know if my brake pads are worn out?",
        "bike-4",
        "On rim brakes, the pads are worn out once their wear grooves have disappeared. Disc pads are worn out when the friction material is thinner than about 0.5 mm.",
    ),
    q(
        "When do disc brake pads need to be replaced?",
        "bike-4",
        "When the friction material is thinner than about 0.5 mm.",
    ),
    q(
        "How do I fix a flat tyre?",
        "bike-5",
        "Remove the wheel, lever one side of the tyre off the rim and take out the tube. Find and remove the cause of the puncture, then fit a patched or new tube.",
    ),
    q(
        "Why does my tube keep getting punctures after I patch it?",
        "bike-5",
        "Whatever caused the puncture is probably still stuck in the tyre. Check the inside of the tyre and remove it before fitting the tube.",
    ),
    q(
        "Why are my disc brakes squealing?",
        "bike-6",
        "Usually because the pads or rotors are contaminated, for example by chain lube or cleaning spray.",
    ),
    q(
        "How do I clean a contaminated brake rotor?",
        "bike-6",
        "Wipe it with isopropyl alcohol. If the pads have soaked up oil, replace them.",
    ),
    q(
        "How high should my bike saddle be?",
        "bike-7",
        "High enough that your leg is almost straight, with a slight bend at the knee, when the pedal is at the bottom.",
    ),
    q(
        "My knees hurt after cycling. Could it be my saddle?",
        "bike-7",
        "Yes. A saddle that is too low strains the knees; raise it until your leg is nearly straight at the bottom of the pedal stroke.",
    ),
    q(
        "Why do my gears keep skipping?",
        "bike-8",
        "The shifter cable tension is probably off. Adjust it with the barrel adjuster on the rear derailleur.",
    ),
    q(
        "How do I adjust my rear derailleur cable tension?",
        "bike-8",
        "Turn the barrel adjuster a quarter turn at a time; turning it anticlockwise moves the chain toward the larger cogs.",
    ),
    q(
        "What tools do I need to maintain my bike at home?",
        "bike-9",
        "Tyre levers, a pump with a pressure gauge, hex keys from 2 to 8 mm, a chain tool and chain lubricant cover the basics.",
    ),
    q(
        "Should I clean my chain after riding in the rain?",
        "bike-2",
        "Yes. Clean and lubricate the chain after any wet ride.",
    ),
    q(
        "Does a worn chain damage other parts?",
        "bike-3",
        "Yes, a worn chain wears out the cassette, so replace it once a chain checker shows it is worn.",
    ),
    # Bread baking
    q("What are the basic ingredients of bread?", "bread-1", "Flour, water, salt and yeast."),
    q(
        "How much water should I use for 500 g of flour?",
        "bread-1",
        "About 325 g of water, with 10 g of salt and 7 g of instant yeast.",
    ),
    q(
        "Why do you need to knead bread dough?",
        "bread-2",
        "Kneading develops gluten, which traps the gas from the yeast so the bread can rise.",
    ),
    q(
        "How do I know when I've kneaded the dough enough?",
        "bread-2",
        "Use the windowpane test: the dough is ready when it is smooth and stretches thin enough to let light through without tearing.",
    ),
    q(
        "How long should bread dough rise?",
        "bread-3",
        "Usually 1 to 2 hours at room temperature, until it has roughly doubled; longer in a cold kitchen.",
    ),
    q(
        "Why is my dough rising so slowly?",
        "bread-3",
        "Most likely the kitchen is cold: at room temperature the first rise takes 1 to 2 hours, but a cold room can slow it down a lot.",
    ),
    q(
        "What is a sourdough starter?",
        "bread-4",
        "A mixture of flour and water that hosts wild yeast and lactic acid bacteria, used to leaven bread.",
    ),
    q(
        "How do I feed my sourdough starter?",
        "bread-4",
        "Feed it with equal weights of flour and water.",
    ),
    q(
        "How do I know when it's ready to bake with?",
        "bread-4",
        "It is ready when it reliably doubles within 4 to 8 hours of a feeding.",
        follows="How do I feed my sourdough starter?",
    ),
    q(
        "How can I tell if my bread is done baking?",
        "bread-5",
        "Check that the inside is at about 93 to 96 °C, or tap the bottom of the loaf: it should sound hollow.",
    ),
    q("What internal temperature should baked bread reach?", "bread-5", "About 93 to 96 °C."),
    q(
        "Why is my bread so dense?",
        "bread-6",
        "A dense loaf is usually under-proofed, under-kneaded, or made with old yeast that has lost its strength.",
    ),
    q(
        "How do I check if my yeast is still good?",
        "bread-6",
        "Mix it with warm water and a pinch of sugar. Good yeast foams within 10 minutes.",
    ),
    q(
        "Why should I put steam in the oven when baking bread?",
        "bread-7",
        "Steam in the first 10 to 15 minutes keeps the crust soft so the loaf can expand, and it gives a shinier, crisper crust.",
    ),
    q(
        "How can I create steam in a home oven?",
        "bread-7",
        "Put a tray of boiling water on the oven floor, or bake the loaf in a covered Dutch oven.",
    ),
    q(
        "Can I leave the salt out of bread?",
        "bread-8",
        "You can, but the bread will taste flat and have a weaker structure, because salt strengthens gluten and adds flavour.",
    ),
    q(
        "What does salt do in bread dough?",
        "bread-8",
        "Salt strengthens the gluten, slows fermentation and is essential for flavour.",
    ),
    q(
        "How should I store homemade bread?",
        "bread-9",
        "Keep it at room temperature in a paper or cloth bag for two to three days, or slice and freeze it for longer storage.",
    ),
    q(
        "Should I keep bread in the fridge?",
        "bread-9",
        "No. The fridge makes bread go stale faster; keep it at room temperature or freeze it.",
    ),
    q(
        "My loaf came out flat and heavy even though I kneaded it well. What went wrong?",
        "bread-6 bread-3",
        "If the kneading was fine, the dough was probably under-proofed or the yeast was old. Let it rise until it has roughly doubled, and test your yeast in warm water with a little sugar.",
    ),
    # Houseplants
    q(
        "How do I know when to water my houseplants?",
        "plant-1",
        "Water when the top 2 to 3 cm of soil feel dry.",
    ),
    q(
        "Should I water my plants every week on a schedule?",
        "plant-1",
        "It is better not to. Watering on a fixed schedule often leads to overwatering; check whether the top 2 to 3 cm of soil are dry instead.",
    ),
    q(
        "Why are the leaves on my plant turning yellow?",
        "plant-2",
        "If the lower leaves are yellowing and the soil is soggy, the plant is probably overwatered. Let the soil dry out and make sure the pot drains.",
    ),
    q(
        "What are the signs of overwatering?",
        "plant-2",
        "Yellowing lower leaves together with constantly soggy soil; left unchecked it can lead to root rot.",
    ),
    q(
        "How often should I water a cactus?",
        "plant-3",
        "Water it thoroughly, then wait until the soil is completely dry before watering again.",
    ),
    q(
        "What about in winter?",
        "plant-3",
        "Much less: in winter, watering a cactus or succulent about once a month is often enough.",
        follows="How often should I water a cactus?",
    ),
    q(
        "What plants grow well in low light?",
        "plant-4",
        "Snake plants, ZZ plants and pothos all tolerate low light well.",
    ),
    q(
        "Can a houseplant live in a room with no windows?",
        "plant-4",
        "Not without artificial light: no houseplant grows in complete darkness.",
    ),
    q(
        "Why do my plant's leaf tips turn brown?",
        "plant-5",
        "Usually dry air, or salts from tap water building up in the soil.",
    ),
    q(
        "How can I increase humidity for my houseplants?",
        "plant-5",
        "Group your plants together or set them on a pebble tray with water.",
    ),
    q(
        "When should I fertilise houseplants?",
        "plant-6",
        "In spring and summer, when they are growing, with a diluted liquid feed every two to four weeks.",
    ),
    q(
        "Do houseplants need fertiliser in winter?",
        "plant-6",
        "Most need little or none, because they grow mainly in spring and summer.",
    ),
    q(
        "How do I know if my plant needs a bigger pot?",
        "plant-7",
        "When roots grow out of the drainage holes or circle tightly around the inside of the pot.",
    ),
    q(
        "How much bigger should a new pot be?",
        "plant-7",
        "Only 2 to 5 cm wider than the old one; a much larger pot holds too much wet soil.",
    ),
    q(
        "How do I get rid of fungus gnats?",
        "plant-8",
        "Let the top layer of soil dry out between waterings and put up yellow sticky traps.",
    ),
    q(
        "What are the tiny flies around my plant pots?",
        "plant-8",
        "Most likely fungus gnats, which breed in potting soil that stays moist.",
    ),
    q(
        "Which houseplants are poisonous to cats?",
        "plant-9",
        "Lilies are especially dangerous for cats, and pothos and dieffenbachia are toxic if chewed.",
    ),
    q(
        "Are spider plants safe for dogs?",
        "plant-9",
        "Yes, spider plants are generally considered safe for pets.",
    ),
    q(
        "My plant has yellow leaves and little flies in the soil. What's happening?",
        "plant-2 plant-8",
        "The soil is staying too wet: overwatering yellows the leaves, and the flies are fungus gnats breeding in the moist soil. Let it dry out between waterings and use sticky traps.",
    ),
    q(
        "Is a snake plant a good choice for a dark bedroom?",
        "plant-4",
        "Yes, snake plants tolerate low light well, as long as the room gets some light.",
    ),
    # Acme Cloud Storage
    q(
        "What plans does Acme Cloud Storage offer?",
        "acme-1",
        "Three: Free with 5 GB, Plus with 200 GB for $2.99 a month, and Pro with 2 TB for $9.99 a month.",
    ),
    q("How much does the Pro plan cost?", "acme-1", "$9.99 per month, for 2 TB of storage."),
    q("How much storage do I get for free?", "acme-1", "The Free plan includes 5 GB."),
    q(
        "What happens when I go over my storage limit?",
        "acme-2",
        "Your existing files stay available, but new uploads and syncing pause until you free up space or upgrade.",
    ),
    q(
        "Does the trash count toward that limit too?",
        "acme-2",
        "Yes, files in the trash count toward your quota, so emptying it frees space.",
        follows="What happens when I go over my storage limit?",
    ),
    q(
        "How does the Acme desktop app sync my files?",
        "acme-3",
        "It keeps a folder on your computer in sync with your cloud storage and uploads changes in the background.",
    ),
    q(
        "What do the blue arrows on my files mean?",
        "acme-3",
        "They mean the file is still syncing. A green check mark appears once it is synced.",
    ),
    q(
        "How do I recover a file I deleted?",
        "acme-4",
        "Restore it from the trash: deleted files are kept for 30 days on Free and Plus, and 180 days on Pro.",
    ),
    q(
        "How long does Acme keep old versions of my files?",
        "acme-4",
        "30 days on the Free and Plus plans, and 180 days on Pro.",
    ),
    q(
        "How do I share a folder with someone?",
        "acme-5",
        "Create a link to the folder and send it to them.",
    ),
    q(
        "Can I put a password on a shared link?",
        "acme-5",
        "Yes, on the Plus and Pro plans, which also let you set an expiry date. Free plan links cannot be password-protected.",
    ),
    q(
        "Is yearly billing cheaper than monthly?",
        "acme-6",
        "Yes. A year costs the same as ten months of monthly billing.",
    ),
    q(
        "How do I cancel my subscription?",
        "acme-6",
        "Go to Settings > Billing. Your plan stays active until the end of the period you have paid for.",
    ),
    q(
        "Do I get money back if I do that mid-month?",
        "acme-6",
        "No, partial periods are not refunded; the plan stays active until the end of the paid period.",
        follows="How do I cancel my subscription?",
    ),
    q("Is my data encrypted on Acme?", "acme-7", "Yes, with TLS in transit and AES-256 at rest."),
    q(
        "How do I turn on two-factor authentication?",
        "acme-7",
        "Go to Settings > Security and turn it on; it is strongly recommended.",
    ),
    q(
        "What is the largest file I can upload?",
        "acme-8",
        "50 GB with the desktop app, or 5 GB through the web browser.",
    ),
    q(
        "Why can't I upload a 10 GB video through the website?",
        "acme-8",
        "Browser uploads are limited to 5 GB per file. Use the desktop app, which accepts files up to 50 GB.",
    ),
    q(
        "My files stopped syncing. What should I check?",
        "acme-9 acme-2",
        "Check that the desktop app is running and signed in, that you are not over your quota, and that no file names contain characters like : or *. Pausing and resuming sync restarts it.",
    ),
    q(
        "I'm on the Free plan and my uploads stopped. Should I upgrade to Plus?",
        "acme-2 acme-1",
        "If you are over the 5 GB Free quota, uploads pause until you free space or upgrade. Emptying the trash may be enough; otherwise Plus gives you 200 GB for $2.99 a month.",
    ),
]

NONCOMMITTAL = [
    "I'm not sure, it depends.",
    "It depends on your situation; there is no single answer to that.",
    "That's hard to say without more details.",
    "I couldn't find a definitive answer to that in the documents.",
    "There are a lot of factors involved, so it could go either way.",
    "Opinions differ on this, so you may want to ask an expert.",
    "I don't have enough information to answer that reliably.",
    "It varies from case to case.",
]

INCOHERENT = [
    "{good} That said, the opposite is also true, so you should never do this. {other} In short: yes, but no.",
    "No. {good} So it is impossible, which is exactly why it always works. {other}",
    "{other} {good} None of the above is correct, except all of it.",
    "Yes and no. {first} But it is also the reverse, every time and never. {other}",
]

LEAD_INS = ["", "", "", "Sure! ", "Good question. ", "From the documentation: "]

LONG_FILLER = (
    "It is worth keeping in mind that every situation is a little different, so treat these "
    "figures as a starting point rather than a strict rule. Small adjustments over time, "
    "based on what you observe, usually work better than large changes all at once. Many "
    "people find it helpful to write down what they tried and what happened, so they can "
    "compare later. If something still seems off after a few attempts, going back to the "
    "basics described above is usually the quickest way to find the cause."
)


def topic_of(passage_id: str) -> str:
    return passage_id.split("-")[0]


def _first_sentence(text: str) -> str:
    return text.split(". ")[0].rstrip(".") + "."


def _retrieve(rng: random.Random, question: Question, strategy: str, hit: bool) -> list[str]:
    """Three passage ids: the gold passage(s) on a hit, topped up with distractors."""
    topic = topic_of(question.gold[0])
    same = [p for p in PASSAGES if topic_of(p) == topic and p not in question.gold]
    other = [p for p in PASSAGES if topic_of(p) != topic]
    docs: list[str] = []
    if hit:
        gold = list(question.gold)
        rng.shuffle(gold)
        keep_both = len(gold) > 1 and rng.random() < BOTH_GOLD[strategy]
        docs = gold[:2] if keep_both else gold[:1]
    while len(docs) < 3:
        pool = same if rng.random() < SAME_TOPIC_DISTRACTOR[strategy] else other
        candidate = rng.choice(pool)
        if candidate not in docs:
            docs.append(candidate)
    if hit and strategy == "dense" and rng.random() < 0.8:
        # Dense puts its match first most of the time; bm25's rank order is noisier.
        rest = docs[1:]
        rng.shuffle(rest)
        docs = docs[:1] + rest
    else:
        rng.shuffle(docs)
    return docs


def _answer(rng: random.Random, question: Question, docs: list[str], hit: bool) -> tuple[str, str]:
    """An answer and its ground-truth quality label."""
    qualities = QUALITY_WEIGHTS[hit]
    quality = rng.choices(list(qualities), weights=list(qualities.values()))[0]
    topic = topic_of(question.gold[0])
    # Off-topic and incoherent answers borrow from an unrelated passage, preferring one the
    # retriever actually returned: that is how such answers arise in a real RAG pipeline.
    unrelated = [d for d in docs if topic_of(d) != topic] or [
        p for p in PASSAGES if topic_of(p) != topic
    ]
    other_id = rng.choice(unrelated)
    if quality == "off_topic":
        borrowed = [x for x in QUESTIONS if other_id in x.gold]
        return rng.choice(borrowed).answer, quality
    if quality == "noncommittal":
        return rng.choice(NONCOMMITTAL), quality
    if quality == "incoherent":
        template = rng.choice(INCOHERENT)
        text = template.format(
            good=question.answer,
            first=_first_sentence(question.answer),
            other=_first_sentence(PASSAGES[other_id]),
        )
        return text, quality
    answer = rng.choice(LEAD_INS) + question.answer
    if rng.random() < LONG_ANSWER_RATE:
        # Long but still correct: it restates the retrieved gold passage and pads with filler.
        background = " ".join(PASSAGES[d] for d in docs if d in question.gold)
        closing = f"I hope this helps! Let me know if you have other questions about {TOPIC_NAMES[topic]}."
        parts = [answer, "To give you the fuller picture:", background, LONG_FILLER, closing]
        answer = " ".join(p for p in parts if p)
    return answer, "good"


def _history(rng: random.Random, question: Question, with_tool_call: bool) -> list[dict[str, str]]:
    """One or two earlier user/assistant turns on the same topic."""
    if question.follows is not None:
        earlier = [next(x for x in QUESTIONS if x.text == question.follows)]
    else:
        topic = topic_of(question.gold[0])
        pool = [
            x
            for x in QUESTIONS
            if topic_of(x.gold[0]) == topic and x is not question and x.follows is None
        ]
        earlier = rng.sample(pool, rng.choice([1, 1, 2]))
    turns: list[dict[str, str]] = []
    for i, prior in enumerate(earlier):
        turns.append({"role": "user", "content": prior.text})
        if with_tool_call and i == len(earlier) - 1:
            call = f'search_knowledge_base(query="{prior.text}")'
            turns.append({"role": "assistant", "content": f"Calling tool: {call}"})
            turns.append({"role": "tool", "content": PASSAGES[prior.gold[0]]})
        turns.append({"role": "assistant", "content": prior.answer})
    return turns


SCHEMA = pl.Schema(
    {
        "conversation_id": pl.String(),
        "question_id": pl.Int64(),
        "strategy": pl.String(),
        "question": pl.String(),
        "answer": pl.String(),
        "documents": pl.List(pl.String()),
        "history": pl.List(pl.Struct({"role": pl.String(), "content": pl.String()})),
        "expected_quality": pl.String(),
        "retrieval_hit": pl.Boolean(),
        "reference": pl.String(),
    }
)


def build_sample(seed: int = SEED) -> pl.DataFrame:
    """Build the sample frame: one row per (question, strategy), 200 rows in all."""
    rng = random.Random(seed)
    n = len(QUESTIONS)
    hits = {s: set(rng.sample(range(n), round(rate * n))) for s, rate in HIT_RATES.items()}

    follow_ups = [i for i, x in enumerate(QUESTIONS) if x.follows is not None]
    others = [i for i in range(n) if QUESTIONS[i].follows is None]
    with_history = follow_ups + rng.sample(others, round(HISTORY_RATE * n) - len(follow_ups))
    tool_calls = set(rng.sample(with_history, TOOL_CALL_HISTORIES))
    # History belongs to the question, so both strategies answer the same conversation.
    histories = {i: _history(rng, QUESTIONS[i], i in tool_calls) for i in sorted(with_history)}

    rows = []
    for i, question in enumerate(QUESTIONS):
        for strategy in ("bm25", "dense"):
            hit = i in hits[strategy]
            doc_ids = _retrieve(rng, question, strategy, hit)
            answer, quality = _answer(rng, question, doc_ids, hit)
            rows.append(
                {
                    "conversation_id": f"conv-{i + 1:03d}-{strategy}",
                    "question_id": i + 1,
                    "strategy": strategy,
                    "question": question.text,
                    "answer": answer,
                    "documents": [PASSAGES[d] for d in doc_ids],
                    "history": histories.get(i),
                    "expected_quality": quality,
                    "retrieval_hit": hit,
                    # The reference (gold) answer, for ContextRecall.
                    "reference": question.answer,
                }
            )
    return pl.DataFrame(rows, schema=SCHEMA)


def write_sample(path: Path, seed: int = SEED) -> pl.DataFrame:
    """Build the sample and write it to ``path`` as Parquet; returns the frame."""
    df = build_sample(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Fixed compression settings keep the bytes identical from one run to the next.
    df.write_parquet(path, compression="zstd", compression_level=9, statistics=False)
    return df


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output Parquet path")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    df = write_sample(args.out, args.seed)
    print(f"wrote {df.height} rows to {args.out} ({args.out.stat().st_size / 1024:.1f} KB)")
    summary = df.group_by("strategy").agg(
        pl.col("retrieval_hit").mean().alias("hit_rate"),
        (pl.col("expected_quality") == "good").mean().alias("good_rate"),
    )
    print(summary.sort("strategy"))
    print(df["expected_quality"].value_counts().sort("expected_quality"))


if __name__ == "__main__":
    main()

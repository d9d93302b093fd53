# ruff: noqa: E501 -- the dialogues are data, one turn per line
"""Hand-written dialogues of the trained detector's labelled set, by a second author
(`engines.follow_up.pair_set` adds them to the templated pairs of `contexts.py`).

The templated set is one author's: a few dozen turn patterns filled from each context's slots. These
are written turn by turn, in another hand and on purpose unlike it: fourteen other domains (IT
support, banking, shopping, travel, health admin, telecoms, HR, insurance, housing, education,
government services, coding, and contracts and legal questions asked another way), terse and verbose
users, lower case and no punctuation, abbreviations ("thx", "pls", "u"), typos, Chinese with English
words in it ("这个 refund"), follow-ups that share hardly a word with the question ("I'm on a Mac",
"她已经休了三个月"), new questions that reuse the answer's words (the hard negatives: "how do I stop
pipes freezing in winter?" after an answer about a burst pipe), and deepening turns.

Every turn is labelled by the rule the detector documents (`engines.follow_up.detector`):

- f, follow_up: more about the same matter: the answer did not work or fit, a condition, the
  user's own case, doubt, a request to explain, the same question for another person or amount;
- d, deepening: the user accepts the answer, says so, and asks a new question on the same case;
- n, new: another matter (even in the same domain, even with the answer's words), a greeting, thanks
  or a closing only.

A block is one context: `# domain | language`, the user's question `Q:`, the assistant's answer
`A:`, then one next turn a line, `f:`, `d:` or `n:` first.
"""

from __future__ import annotations

from dataclasses import dataclass

LABELS = {"f": "follow_up", "d": "deepening", "n": "new"}


@dataclass(frozen=True)
class Dialogue:
    language: str
    domain: str
    question: str
    answer: str
    turns: tuple[tuple[str, str], ...]  # (label, next turn)


_EN = """
# it support | en
Q: my laptop wont connect to the vpn since this morning, it just says "connection timed out"
A: That error usually means the VPN client can't reach the gateway. Check you're on a working network, then quit the GlobalProtect app completely and reopen it; if that fails, change the portal address to vpn2.corp.example.com.
f: tried both, same timeout
f: where do I even change the portal address
f: im on hotel wifi if that matters
f: it worked yesterday at home tho, nothing changed
f: "quit completely" meaning what, from the tray?
d: ok the second portal worked, thanks!! is there a way to make it connect automatically when i log in?
d: that did it. while I have you, does the vpn need to be on for teams calls or is that fine without
n: thx
n: How do I connect my PS5 to hotel wifi that has a login page?
n: also my second monitor keeps flickering, any idea?
n: good morning! quick one about expense reports
n: sorted now, the second address worked. thanks!
f: ugh still nothing, and I have a client call in 20 min

# it support | en
Q: Outlook keeps asking me for my password over and over
A: That's usually a cached credential gone stale. Close Outlook, open Windows Credential Manager, delete the entries starting with "MicrosoftOffice16", then start Outlook and sign in once.
f: I'm on a Mac
f: deleted them, it's asking again 5 min later
f: i dont see any entries with that name, only ones called outlook
f: could it be because I changed my password yesterday?
f: do i lose my emails if I delete those
d: fixed, cheers. Can I also stop it asking every time I open the shared calendar?
n: ok great
n: what's the password policy for new starters? my colleague joins monday
n: Is there a way to recall an email I sent by mistake?
n: can you book me a meeting room for 3pm
n: ok that did it, all good now cheers

# it support | en
Q: How do I install Python on my work laptop? I don't have admin rights.
A: Use the Software Center: search for "Python 3.12", click Install, and it runs with the rights it needs. If it isn't listed, raise a request on the IT portal under "Software".
f: its not listed
f: how long does a request usually take
f: and pip, will that work without admin?
f: what about anaconda, is that allowed instead
d: got it installed, thanks. how do i add it to the PATH so the terminal finds it?
d: great, found it. one more thing, can VS Code be installed the same way?
n: cheers, that's everything
n: do we have a license for Adobe Acrobat?
n: how do I install a ceiling fan myself
n: hey

# banking | en
Q: I was charged twice for the same card payment at a petrol station.
A: A duplicate often shows while the second one is only a pending authorisation; it usually drops off within 3–5 working days. If both are still there after that, you can dispute the second one in the app under Transactions > Report a problem.
f: its been a week already
f: both say "completed" not pending
f: and if the petrol station refuses to refund?
f: the amount was £82.40 both times, at 8:14 and 8:15
f: do I get the money back while the dispute is open
d: okay, I'll wait until friday then. how do i set up alerts for every card payment?
n: thanks for the help, bye
n: how much do petrol stations on motorways charge per litre usually?
n: can I open a savings account for my daughter?
n: what time do branches close on saturday
n: Ah I see it's gone now, never mind!
f: so I just sit and wait?

# banking | en
Q: What's the daily limit for transfers in the app?
A: Standard accounts can send up to £10,000 a day in the app; you can raise it to £25,000 for a single payment by calling us and passing security.
f: I need to send 18k for a house deposit tomorrow
f: is the 10k per transfer or in total per day
f: what if I split it over two days
f: does the limit reset at midnight or 24h after
d: makes sense, I'll call then. what security questions do they ask?
d: perfect. and will a transfer that big go through the same day?
n: ok
n: what's the limit on how much cash I can take on a plane to Spain
n: how do I change my address
n: Hello?
n: great, that's all I needed to know

# banking | en
Q: Can I get a mortgage if I'm self-employed?
A: Yes. Lenders usually want two years of accounts or tax returns (SA302s), and they'll average your income over that period.
f: I've only been self employed for 14 months
f: what if my income dropped a lot last year
f: do they count dividends from my ltd company
f: so my old salary doesn't matter at all?
f: sorry what's an SA302
d: right, I have 3 years of accounts. How much deposit would I typically need?
d: okay that's fine then. does using a broker help for self-employed people?
n: thanks, that's helpful
n: How do I register as self-employed with HMRC?
n: can you recommend accounting software for freelancers?

# shopping | en
Q: I ordered a sofa three weeks ago and the delivery date keeps moving.
A: Sorry about that. Large items are shipped by our furniture partner; the latest date on your order is 14 June. If it moves again, you can cancel for a full refund or ask for a 10% goodwill discount.
f: 14 june is no good, I'm away that week
f: will I get the delivery fee back too if I cancel
f: 10% of the sofa or the whole order?
f: can't you just give me a fixed date
f: it already moved 3 times!!
d: ok I'll take the discount. can they take the old sofa away when they deliver?
n: Thanks, bye.
n: How do I get rid of an old sofa through the council?
n: do you sell sofa beds that fit a small room?
n: hi
n: fine, I'll wait and see. thanks for explaining

# shopping | en
Q: Does this jacket run small? I'm usually a medium.
A: It's a slim fit, so most customers size up: if you're a medium elsewhere, a large will fit better, especially over a jumper.
f: and the sleeves, are they long?
f: I'm 1.85m and 80kg
f: hmm so large even if I'm between S and M?
f: what if I want it loose
d: thanks, large it is. is the colour in the photos accurate?
n: great thanks
n: what does slim fit mean for jeans, do they stretch?
n: can I pay with klarna
n: where is my order 55231
n: perfect, ordering the large now, thank you!
f: my shoulders are quite broad

# shopping | en
Q: Can I return something I bought in the sale?
A: Yes, sale items can be returned within 14 days in the same condition with tags on; final clearance items marked "no returns" can't.
f: how do i know if it was final clearance
f: the tags are off but I never wore it
f: it's day 16, I was in hospital
f: does that go for online orders too or only in store?
d: ok that's clear. do I get a refund or store credit?
d: great. and who pays the return postage?
n: ty
n: when does the summer sale end?
n: can I return a library book at another branch
n: bye!

# travel | en
Q: My flight to Lisbon was cancelled, what am I entitled to?
A: Under UK261/EU261 you can choose a full refund or rebooking, get meals and a hotel if you're stuck overnight, and, if you were told less than 14 days before, compensation of up to €400 for that distance unless it was extraordinary circumstances.
f: they said it was weather
f: I was told 3 days before
f: do I have to pay the hotel myself and claim it back?
f: the airline only offered a voucher
f: is it 400 per person or per booking
d: thank you! how do I actually submit the compensation claim?
n: perfect, thanks
n: whats the weather like in lisbon in october?
n: Can I bring a power bank in hand luggage?
n: how many days do you need for Lisbon and Porto
n: brilliant, that's really clear, thanks a lot
f: they're refusing to pay anything, what now

# travel | en
Q: Do I need a visa to visit Japan with a Canadian passport?
A: No, Canadians can visit Japan visa-free for up to 90 days as tourists; your passport must be valid for the whole stay.
f: what about business meetings, is that still visa free
f: my passport expires in november and I'm going in october
f: I have a criminal record from 10 years ago, does that matter
f: and if I want to stay 4 months
f: what about my wife, she has a Mexican passport
d: great, thanks. Do I need to fill in anything online before arrival?
n: cool thanks
n: do Canadians need a visa for the US?
n: best ramen in tokyo?

# travel | en
Q: Is it cheaper to take the train or fly from Paris to Barcelona?
A: Booked early, the direct TGV is often €40–90 and takes about 6h30 city centre to city centre; flights can be cheaper but add transfers and bag fees, so door to door the train often wins.
f: I'm travelling with 2 big suitcases
f: what if I book just a week before
f: is there a night train
f: 6h30 seems long, any faster option?
d: train it is. where do I buy the tickets, SNCF or Renfe?
n: merci!
n: what's the cheapest way to get from Barcelona airport to the city?
n: Can you translate "where is the station" into Spanish?
n: hi again
n: ok sold, booking the train now

# health admin | en
Q: How do I get a repeat prescription from my GP?
A: Request it through the NHS App or your surgery's online form; allow two working days, then collect it at your nominated pharmacy.
f: i don't have the nhs app, can I phone instead
f: I'm running out tomorrow
f: how do I nominate a pharmacy
f: what if it's a controlled medication
d: thanks. can I get 3 months at once instead of one?
n: thanks!!
n: how do I register with a new GP after moving?
n: is it ok to take paracetamol with ibuprofen?
n: good evening
n: done, ordered it on the app. thank you

# health admin | en
Q: My insurance rejected the claim for my physio sessions.
A: Check the rejection letter for the reason: most often physio needs a GP referral or pre-authorisation. You can appeal within 60 days by sending the referral and the therapist's notes.
f: there was no referral, I went directly
f: where do I send the appeal
f: it just says "not covered under plan"
f: is 60 days from the letter or from the treatment
f: can the physio send the notes directly
d: okay, I'll get a referral. Will future sessions be covered once I have it?
n: thank you
n: how many physio sessions are normal for a sprained ankle
n: can I claim for new glasses?

# health admin | en
Q: How do I book a blood test?
A: Your GP surgery arranges routine blood tests; you'll get a form, then book a slot at a phlebotomy clinic online or by phone. Some tests need fasting for 8–12 hours.
f: does mine need fasting? it's for cholesterol
f: can I just walk in
f: the online booking has no slots for 3 weeks
f: i lost the form
d: got it, thanks. how long until I get the results?
n: ok thanks a lot
n: how do i get a copy of my vaccination record
n: good afternoon

# telecom | en
Q: my phone bill is £20 more than usual this month
A: The extra is £19.80 for data roaming in Switzerland on 3–5 May: Switzerland isn't in your EU roaming zone, so it's charged per MB.
f: I didnt even use my phone there
f: it was only a few hours at the airport
f: can you refund it, nobody told me
f: which zone is switzerland in then?
f: how do I stop this happening again
d: ok fair enough. can I add a roaming pass for next time I go?
n: cheers
n: how much is the train from Zurich to Geneva
n: I want to upgrade my phone
n: right, I'll be more careful next time. thanks

# telecom | en
Q: My home broadband keeps dropping every evening.
A: Evening drops are often congestion or Wi-Fi interference. Restart the router, then test with a cable; if the cable connection also drops, we'll run a line test.
f: with a cable it still drops
f: its always around 8pm
f: i dont have a cable long enough lol
f: restarted it 3 times already
d: thanks, cable is stable, so it's wifi. should I get a mesh system?
n: ok
n: I'm moving house next month, can I take my broadband with me?
n: How do I stop my kids' tablets using the wifi after 9pm?

# telecom | en
Q: How do I port my number to a new network?
A: Text PAC to 65075 to get your code, give it to the new network, and the switch happens within one working day; your old contract ends when the number moves.
f: i'm still in contract for 6 months
f: what if I'm on pay as you go
f: do i lose my texts and photos
f: the text to 65075 doesnt go through
d: great, got the code. Will my voicemail move over too?
n: thanks
n: how do I block a number that keeps calling me
n: which network has the best coverage in rural Wales

# hr | en
Q: How many days of annual leave can I carry over to next year?
A: You can carry over up to five days; they must be used by 31 March or they're lost. Anything above five needs your manager's approval.
f: I have 9 left
f: what if my manager is on leave too
f: does that include bank holidays
f: can I get paid for the extra days instead
f: 31 march of next year right
d: okay thanks. how do I book leave in the HR system?
n: thanks, bye
n: how many days of sick leave do we get?
n: can I work from abroad for two weeks?
n: hey
n: cool, I'll sort it with my manager. thanks!

# hr | en
Q: When will I receive my P60?
A: P60s are issued by 31 May for the previous tax year; you'll find yours in the payroll portal under Documents.
f: it's june and it's not there
f: I left the company in march, do I still get one
f: what's the difference to a P45
f: can I get a paper copy
d: found it, thank you. do I need it for my tax return?
n: perfect
n: when is payday this month?
n: how do I change the bank account my salary goes to

# hr | en
Q: Can I take parental leave if my partner is already on maternity leave?
A: Yes. Shared parental leave lets you split up to 50 weeks between you; your partner ends her maternity leave early and you both give 8 weeks' notice.
f: she's already 3 months in
f: 8 weeks notice to who
f: do I get paid during it
f: we're not married, does that matter
d: that's really helpful. Can I take it in blocks instead of all at once?
n: thank u
n: what's the notice period if I want to resign?
n: how do I apply for child benefit

# insurance | en
Q: Does my home insurance cover a burst pipe?
A: Yes, escape of water is covered: the damage to floors, walls and belongings, less the £250 excess. The pipe repair itself is only covered if you have the home emergency add-on.
f: I don't have the add-on
f: the water came from my neighbour's flat
f: is the excess per claim or per item
f: what counts as belongings, my laptop got wet
f: so the plumber isn't covered at all?
d: thanks. how do I start the claim?
n: great, thanks
n: how do I stop pipes freezing in winter?
n: is my car insured if my son drives it
n: hello
n: that's all, thank you very much
f: plumber said it was an old joint that gave way, does that change anything

# insurance | en
Q: My car was hit while it was parked and the other driver left.
A: Report it to the police within 24 hours to get a crime reference, then claim on your own policy; without the other driver it's a fault claim unless you're covered for uninsured losses.
f: it happened 2 days ago
f: will my no claims bonus go down
f: a neighbour has a photo of the number plate
f: i only have third party
d: okay, I'll call the police. what should I photograph for the claim?
n: thanks, bye
n: how do I report a pothole to the council?

# insurance | en
Q: Is travel insurance worth it for a weekend trip in Europe?
A: Usually yes: it costs a few pounds and covers cancellations, lost bags and medical costs the GHIC doesn't, like getting flown home.
f: I already have a GHIC card
f: what if I already booked, can I still buy it
f: maybe my bank account includes travel insurance?
f: I have asthma, do I have to declare it
d: got it, thanks! is annual cover cheaper if I travel 3 times a year?
n: ok
n: what's the cheapest weekend trip from London?
n: can I take my dog on a ferry to france

# housing | en
Q: My landlord wants to raise the rent by 15%, can he do that?
A: In a periodic tenancy he can propose an increase once a year with a Section 13 notice and at least one month's notice; you can challenge it at a tribunal if it's above market rent. During a fixed term only if the contract has a rent review clause.
f: I'm on a fixed term until next april
f: he just sent a text, is that a valid notice
f: what's market rent, how do they decide
f: if I challenge it can he evict me
f: 15% seems insane though
d: okay thanks. how do I find comparable rents in my area?
n: thanks
n: my boiler's broken and he won't fix it
n: how do I apply for council housing
n: ok, I'll talk to him first. thanks for the help

# housing | en
Q: How long does a landlord have to return my deposit?
A: Once you agree the amount, the deposit scheme must pay it back within 10 days. If you disagree about deductions, you can raise a free dispute with the scheme.
f: we haven't agreed anything, he just went silent
f: which scheme is mine
f: he's deducting £400 for cleaning
f: what if he never protected the deposit
d: great, I'll raise a dispute. What evidence should I send?
n: thanks a lot
n: how long does it take to get a mortgage offer?

# housing | en
Q: Can I sublet a room in my rented flat?
A: Only with your landlord's written permission; most tenancy agreements forbid subletting, and doing it without consent can be grounds for eviction.
f: my contract doesn't say anything about it
f: what if it's just for 2 months over summer
f: it's my boyfriend, does that count as subletting
f: and airbnb?
d: okay, I'll ask in writing. Is there a template letter?
n: thanks
n: am I allowed to paint the walls?
n: how much is council tax for a 2-bed

# education | en
Q: How do I apply for an extension on my dissertation?
A: Submit an extenuating circumstances form on the student portal before the deadline, with evidence such as a doctor's note; extensions are usually up to 14 days.
f: the deadline is tomorrow
f: I don't have a doctor's note, it's a family issue
f: can I get more than 14 days
f: who decides?
f: I already applied once for another module
d: thanks, submitted it. how long do they take to reply?
n: cheers
n: how do I apply for a masters at another uni
n: when does the library close during exams
n: alright, filling it in now, thanks

# education | en
Q: My son's school says he can't wear his trainers, is that legal?
A: Schools can set a uniform policy including shoes, and it's lawful as long as it's reasonable and they consider things like medical needs or cost.
f: he has flat feet and the doctor said trainers
f: they sent him home for it
f: the black school shoes cost £60, we can't afford that
f: where is the uniform policy supposed to be published
d: okay, we'll get a doctor's letter. who should I send it to, the head or his form tutor?
n: thanks
n: Can schools ban phones?
n: what age can he walk to school alone

# education | en
Q: What's the difference between a BA and a BSc?
A: It's mostly the subject area and approach: a BSc is in the sciences or more quantitative, a BA in the arts, humanities and social sciences; some subjects like psychology are offered as both.
f: so for economics which one is better
f: do employers care
f: is a bsc harder
f: wait, psychology can be both? how
d: makes sense. Are BSc courses longer in Scotland?
n: ok cool
n: what's the difference between a latte and a flat white?
n: how do i apply for student finance

# government | en
Q: How long does it take to renew a passport?
A: Online renewals usually take about three weeks; allow longer in spring and summer. A one-week fast track service is available if you book an appointment.
f: i'm flying in 10 days
f: how much is the fast track
f: can I travel with my old one until the new one arrives
f: what if my photo gets rejected
d: thanks, I'll apply online. do I need to send the old passport back?
n: brilliant, thanks
n: how long does it take to get a driving licence?
n: how long can I stay in Thailand without a visa
n: great, I'll do it tonight. cheers

# government | en
Q: I missed the self-assessment tax deadline.
A: You'll get an automatic £100 penalty even if there's no tax to pay; after three months daily penalties of £10 start. File as soon as possible and appeal if you had a reasonable excuse.
f: I was in hospital in january
f: I don't owe any tax though
f: how do i appeal
f: it was only 2 days late
f: does the 100 get added to my tax code
d: okay, I'll file today. Can I pay the tax in instalments?
n: thanks
n: what's the deadline for registering to vote?
n: what are the income tax bands this year

# government | en
Q: How do I register a death?
A: In England you register it within 5 days at the register office for the area where the person died; bring the medical certificate of cause of death.
f: it's been a week already
f: my dad died abroad, in Spain
f: do I need an appointment
f: I'm not next of kin, I'm his neighbour
d: thank you. how many copies of the certificate should I get?
n: thanks for your help
n: how do I register a new car?

# coding | en
Q: why does my python script say ModuleNotFoundError: No module named 'requests'
A: requests isn't installed in the interpreter you're running. Install it with python -m pip install requests, using the same python you run the script with.
f: I did pip install and it said already satisfied
f: I'm using a venv
f: python -m pip isn't recognised
f: still the same error in vscode, works in terminal
f: what's the difference between pip and python -m pip
d: that fixed it, thanks. how do I save the requirements so my teammate gets the same?
n: nice
n: what does ModuleNotFoundError mean in node?
n: how do I reverse a list in python
n: thanks mate, all sorted
n: works now!! thanks a ton
f: now it says No module named 'urllib3'

# coding | en
Q: How do I undo my last git commit but keep the changes?
A: Run git reset --soft HEAD~1: the commit is removed and your changes stay staged.
f: I already pushed it
f: and if I want them unstaged?
f: what does HEAD~1 mean
f: it says ambiguous argument HEAD~1
d: perfect, worked. how do I just change the commit message next time?
n: thanks
n: how do I undo a mistake in excel
n: what's a good git GUI for mac
f: oops, I ran reset --hard instead, are my changes gone?

# coding | en
Q: What's the difference between == and is in Python?
A: == compares values, is compares identity (whether two names point to the same object). Use is only for None, True and False.
f: so why does 256 is 256 give True
f: what about strings
f: can you give an example where == is True and is is False
d: got it, thanks. when should I implement __eq__ myself?
n: ok
n: what's the difference between a list and a tuple
n: how do i learn rust

# contracts | en
Q: Can you tell me what kind of clause this is? "Supplier's aggregate liability under this Agreement shall not exceed the fees paid in the twelve (12) months preceding the claim."
A: [limitation of liability] It caps the supplier's total liability at the fees paid in the 12 months before the claim.
f: does that cap include data breaches
f: we only paid for 3 months so far
f: is that even enforceable in the UK
f: so if they lose all our data we get back 3 months of fees??
f: what about gross negligence
d: ok understood. what's a normal cap to ask for in negotiations?
n: thx
n: what's a dog owner's liability if the dog bites someone
n: next clause please: "This Agreement is governed by the laws of Ireland."
n: that's clear, I'll take it from here

# contracts | en
Q: what does "time is of the essence" mean in a contract
A: It makes the contract's deadlines essential terms: missing one, even by a day, lets the other side terminate and claim damages, not only claim damages.
f: even one day??
f: our delivery was 2 days late because of customs
f: does it apply to payment dates too
f: can they still terminate if they accepted the late delivery
d: makes sense, thanks. should I remove it from our draft before signing?
n: thanks
n: what does "without prejudice" mean on an email
n: what time is it in new york

# contracts | en
Q: Is an email enough to terminate our contract? The clause says "written notice".
A: Often yes: courts have treated email as writing, unless the contract says notices must be sent by post or to a specific address. Check the notices clause.
f: the notices clause says registered post
f: we already sent an email last week
f: what if they replied to the email and acknowledged it
f: does whatsapp count
d: ok I'll send it by post too. how many days before the end date should it arrive?
n: thanks
n: can I cancel my gym membership by email?
n: how do I write a formal complaint letter

# legal | en
Q: My employer hasn't paid my last month's salary, what can I do?
A: Raise a written grievance first; if that fails, you can claim unlawful deduction of wages at an employment tribunal within three months less one day, after early conciliation with Acas.
f: the company went bust
f: three months from when?
f: i'm a contractor not an employee
f: do I need a lawyer for the tribunal
f: they've been saying they'll pay "soon" for 6 weeks now
d: thank you. what should the grievance letter include?
n: thanks
n: what's the minimum wage now
n: can my employer read my work emails
n: thank you, I'll write to HR tomorrow then

# legal | en
Q: Someone posted a fake bad review of my café. Can I sue?
A: Possibly for defamation, but you'd need to show serious financial loss, and it's expensive. First report it to the platform and reply calmly in public.
f: they said we have rats, we don't
f: it's definitely a competitor
f: how much would it cost roughly
f: the platform ignored my report
d: ok, I'll try the platform again. how should I word the public reply?
n: thanks for the advice
n: how do I get more reviews on google
n: can I sue my neighbour over a tree that blocks my light

# contracts | en
Q: is this a non-compete? "For 12 months after termination, the Consultant shall not provide similar services to any competitor of the Client within the EU."
A: [non-compete] Yes: for a year after the contract ends the consultant can't do similar work for the client's competitors anywhere in the EU.
f: the whole EU seems way too broad
f: Is it enforceable if they don't pay me anything during those 12 months?
f: what counts as a competitor here
f: I'm based in Switzerland, does it bind me
f: and if the client terminates early for no reason?
d: understood, thanks. can I negotiate it down to 6 months?
n: thanks
n: is a non-disclosure agreement the same as a confidentiality clause?
n: Check this one too: "Each party shall bear its own costs."

# contracts | en
Q: What does this mean? "The Customer shall indemnify the Supplier against all losses arising from the Customer's use of the Software."
A: [indemnity] The customer must cover any loss the supplier suffers because of how the customer uses the software, including third-party claims.
f: all losses? including legal fees?
f: is there a cap on that
f: what if the loss is partly the supplier's fault
f: we're the customer btw
f: so if a hacker gets in through their bug we still pay??
d: ok, clear. what's a fair way to narrow it down?
n: cheers
n: What's the difference between a warranty and a guarantee on a washing machine?

# contracts | en
Q: Our supplier wants to add "Prices may be adjusted annually in line with CPI." Is that normal?
A: Yes, an annual CPI indexation clause is common in multi-year supply contracts; it lets prices follow inflation instead of being renegotiated.
f: which CPI though, UK or EU
f: can it go down too?
f: inflation was 11% last year, that would kill us
f: can we ask for a cap, like max 5%
d: makes sense. Should the first adjustment date be written in too?
n: ok thanks
n: what's the current CPI in the UK?
n: how do I calculate inflation on my savings

# customer service | en
Q: I can't log in, it says my account is locked.
A: Accounts lock after five failed attempts. Wait 30 minutes and try again, or reset your password from the login page to unlock it straight away.
f: I only tried twice though
f: the reset email never comes
f: it's been an hour and still locked
f: Could someone else be trying to get into my account?
d: reset worked, thank you. Can I turn on two-step verification?
n: thank you, I'm in now
n: how do I delete my account completely
n: my card was declined at checkout

# customer service | en
Q: Where's my refund? I returned the item two weeks ago.
A: We received your return on 3 March; refunds go back to the original payment method within 5–7 working days, so it should arrive by 12 March.
f: today is the 14th
f: I paid with a gift card, where does it go then
f: the bank says nothing is pending
f: can you send me proof of the refund
f: I was charged for return shipping too
d: great, it's there now. Will the return shipping fee also be refunded?
n: thanks for checking
n: I want to return another order too, 88412

# legal | en
Q: Can my landlord enter my flat without telling me?
A: Not normally: he must give at least 24 hours' written notice and come at a reasonable time, unless it's an emergency like a gas leak or flooding.
f: he came in while I was at work
f: he says the contract allows it
f: what counts as an emergency
f: is a text message written notice?
f: what can I do if he does it again
d: ok thanks, that's clear. should I change the locks?
n: thanks a lot
n: can police enter my home without a warrant?
n: how much notice do I need to give to move out

# legal | en
Q: Do I have to pay a parking fine from a private car park?
A: A private parking charge isn't a fine; it's an invoice for breach of contract. You can appeal to the operator, then to POPLA or the IAS, and they can only take you to court, not issue penalty points.
f: I was only 10 minutes over
f: the signs were hidden behind a tree
f: they sent it to my old address
f: will it affect my credit score if I ignore it
f: it was my wife driving, not me
d: ok, I'll appeal. what should I put in the appeal?
n: cheers
n: how do I appeal a speeding ticket?
n: where can I park for free near the station

# general | en
Q: How do I get red wine out of a carpet?
A: Blot it, don't rub; pour a little cold water, blot again, then cover it with a paste of baking soda and water, let it dry and vacuum.
f: it's already dry from last night
f: I only have vinegar
f: the carpet is cream wool
f: do I use white wine to neutralize it? heard that somewhere
d: worked really well, thanks! and for a coffee stain on the sofa?
n: amazing, thank you
n: how do I get chewing gum out of hair
n: what wine goes with lamb?

# general | en
Q: How long should I leave a cake to cool before icing it?
A: Let it cool in the tin for 10 minutes, then on a rack until completely cold, about 1–2 hours; icing a warm cake makes it melt and slide.
f: I'm short on time, guests come in 40 min
f: can I put it in the fridge to speed it up
f: it's a cheesecake actually
d: thanks, perfect. how do I stop the icing going runny?
n: great
n: How long do I leave a steak to rest after cooking?
n: what's an easy dessert without an oven

# general | en
Q: what's a good stretch for lower back pain after sitting all day?
A: Try the knee-to-chest stretch: lie on your back, pull one knee to your chest, hold 20–30 seconds, switch legs, and repeat a few times; a cat-cow stretch also helps.
f: it hurts more when I do that
f: I can't lie on the floor at work
f: how often per day
f: the pain goes down my left leg
d: feels better already, thanks. how should I set up my desk chair?
n: thanks!
n: what's a good stretch before running?
n: how many hours of sleep do adults need
"""

_ZH = """
# it support | zh
Q: 企业微信登录不上，一直提示"网络异常"
A: 先确认能正常上网，然后退出企业微信重新登录；如果还是不行，在登录页点"设置"，把代理改成"不使用代理"再试。
f: 网是好的，别的app都能用
f: 代理设置在哪，没找到
f: 我是mac版的
f: 重启电脑也没用
f: 就我一个人这样，同事都正常
d: 改了代理就好了，谢谢！顺便问下，能在两台电脑上同时登录吗？
d: 好了好了。那以后换电脑的话聊天记录怎么迁移？
n: 好的
n: 家里的网一到晚上就很慢是怎么回事
n: 会议室的投影仪连不上怎么办
n: 早上好
n: 可以了可以了，谢谢
f: 还是不行，一直转圈

# it support | zh
Q: 打印机显示脱机，打印不了
A: 先看打印机是否开机、有没有连上同一个网络；然后在电脑的"设置-打印机"里把它删掉重新添加，一般就能恢复。
f: 开着的，也连着wifi
f: 删了以后找不到这台打印机了
f: 我用的是公司的共享打印机，三楼那台
f: 昨天还能打
d: 重新添加就好了，谢啦。怎么设置默认双面打印？
n: 谢谢
n: 打印机墨盒在哪里领
n: 我的电脑风扇声音特别大正常吗
n: 搞定，打出来了

# it support | zh
Q: 电脑越来越卡，要不要重装系统？
A: 先别急着重装：看看任务管理器里哪个程序占用CPU和内存最多，关掉开机自启的软件，再清理一下C盘，通常会快不少。
f: C盘就剩2个G了
f: 任务管理器里没看到特别占的
f: 是那种开个浏览器都要等半天
f: 电脑用了五年了
f: 自启的在哪里关
d: 关了几个自启动，确实快了，谢谢。要不要加个内存条？
n: 好的谢谢
n: 重装系统要多少钱，外面店里
n: 手机越来越卡怎么办
n: 行，我先按你说的试试
f: 清理完C盘还是卡

# banking | zh
Q: 信用卡账单可以分期吗？
A: 可以，出账后到还款日之前在App里申请账单分期，可选3、6、12期，每期收取一定手续费，具体费率以页面显示为准。
f: 已经过了还款日了还能分吗
f: 手续费大概多少
f: 我这个月账单一万二，能只分一部分吗
f: 分期会影响征信吗
f: 提前还完的话手续费退吗
d: 好的，明白了。那分期以后额度会恢复吗？
n: 谢谢
n: 房贷可以提前还吗
n: 怎么注销一张信用卡
n: 好的，我去App上弄一下
f: App上没找到分期的入口

# banking | zh
Q: 跨行转账多久能到账？
A: 通过手机银行转账一般实时或两小时内到账；选择"普通到账"会在24小时内到账，大额转账可能需要人工审核。
f: 我转了三个小时了还没到
f: 转了五万，算大额吗
f: 对方说没收到，我这边显示成功了
f: 周末转的也是实时吗
d: 收到了，谢谢。以后能不能设置成默认实时到账？
n: 好的
n: 外汇转账去美国要多久
n: 银行卡丢了怎么挂失
n: 到账了，没事了

# banking | zh
Q: 房贷提前还款要注意什么？
A: 先跟银行预约，一般要提前一个月申请；有的合同规定还款满一年内提前还要交违约金，另外可以选择缩短年限或减少月供。
f: 我贷款才八个月
f: 缩短年限和减少月供哪个划算
f: 违约金一般多少
f: 我只想还一部分，十万
f: 是等额本息的
d: 了解了，谢谢。那提前还款以后利率会变吗？
n: 谢谢啦
n: 车贷能提前还吗
n: 现在存款利率是多少
n: 明白了，我去跟银行约一下，谢谢

# shopping | zh
Q: 买的衣服不合适，可以七天无理由退货吗？
A: 可以，只要吊牌齐全、不影响二次销售，签收后七天内在订单页申请退货；退货运费如果买了运费险就是免费的。
f: 吊牌我剪了
f: 已经第八天了
f: 没买运费险，运费多少
f: 是特价款，页面写着不退不换
f: 我只是试穿了一下
d: 好的已经申请了，谢谢。退款大概几天到账？
n: 好的
n: 怎么给商家差评
n: 这家店有没有实体店
n: OK，已经申请退货了，谢谢
f: 申请的时候要选什么理由

# shopping | zh
Q: 我刚买的手机降价了两百，能退差价吗？
A: 如果商品支持价保，在保价期内（一般是签收后7天）到订单页申请价格保护，差价会退回原支付账户。
f: 我是第十天发现的
f: 页面上没看到价保的按钮
f: 降价是因为参加了满减活动
f: 是在直播间买的
d: 申请成功了，多谢。那以后买东西怎么看有没有价保？
n: 谢谢
n: 这个手机防水吗
n: 618什么时候开始
n: 好嘞，谢谢客服

# shopping | zh
Q: 快递显示已签收，但我根本没收到
A: 先问问家人、前台或者看看快递柜、驿站；如果都没有，联系快递员确认签收人，24小时内还找不到可以在订单页申请售后，我们帮你追查。
f: 快递柜和驿站都找过了
f: 快递员电话打不通
f: 签收人写的是"本人"，可我一直在家
f: 已经过了两天了
f: 东西挺贵的，一千多
d: 找到了，放在隔壁了，谢谢。以后能不能要求必须送货上门？
n: 好吧
n: 怎么寄快递到国外
n: 我想改一下收货地址
f: 我看了监控，快递员根本没来过
n: 行，那我再等等

# travel | zh
Q: 高铁票可以改签吗？
A: 可以，开车前在12306上改签，不收费；开车前8天以上改签到别的日期也不收手续费，开车后只能改当日的车次。
f: 已经开车了十分钟
f: 我想改到下周
f: 改签到更贵的车次要补差价吗
f: 我是在携程上买的
d: 改好了，谢谢！那退票的话怎么收费？
n: 好的
n: 北京到上海坐飞机要多久
n: 高铁上可以带榴莲吗
n: 改好了，没别的问题了
f: 12306上显示不能改签

# travel | zh
Q: 航班延误了四个小时，能要赔偿吗？
A: 看延误原因：航空公司自身原因（如机务、调配）通常有补偿标准，一般是200到400元；天气、空管等原因不赔，但要提供餐食和改签。
f: 说是天气原因，可是别的航班都飞了
f: 补偿要自己去申请吗
f: 我买的是特价票
f: 我因为延误错过了转机
f: 没给我们吃的
d: 明白了，谢谢。怎么向民航局投诉？
n: 好的谢谢
n: 飞机上能带充电宝吗
n: 去三亚哪个季节最好
n: 知道了，那我去找柜台问问

# travel | zh
Q: 办日本旅游签证需要什么材料？
A: 一般要护照、照片、申请表、在职证明和近半年的银行流水，通过有资质的旅行社递交，大概一周左右出签。
f: 我是自由职业，没有在职证明
f: 流水要多少钱才够
f: 我护照明年三月到期
f: 孩子也要一起去，他还在上小学
f: 可以自己去领馆递吗
d: 好的，材料我准备一下。三年多次签证的条件是什么？
n: 谢谢
n: 去韩国需要签证吗
n: 东京有什么好玩的

# health admin | zh
Q: 异地看病医保能报销吗？
A: 可以，先在国家医保服务平台App上办理异地就医备案，备案后在定点医院就医可以直接结算；没备案的回参保地手工报销，比例会低一些。
f: 我已经看完病了，才知道要备案
f: 备案要多久能生效
f: 是急诊，来不及备案
f: 我是退休人员，医保在老家
f: 手工报销需要哪些单据
d: 备案好了，谢谢。那门诊费用也能直接结算吗？
n: 好的
n: 医保卡丢了怎么补办
n: 感冒了吃什么药好得快
n: 谢谢，我回去就办备案
f: 这个 App 叫什么名字，我搜不到

# health admin | zh
Q: 怎么在网上挂专家号？
A: 用医院的公众号或者"健康160"这类平台，选科室和医生，专家号一般每周固定时间放号，放号时间在医生页面能看到。
f: 每次放号一秒就没了
f: 我想挂的是北京协和的
f: 能不能帮别人挂
f: 放号时间在哪看
d: 挂上了，谢谢。看病那天要带什么？
n: 谢谢啦
n: 体检报告怎么看懂
n: 医院附近哪里停车方便
n: 好的，我明天早上蹲一下放号

# health admin | zh
Q: 体检报告上说"窦性心律不齐"，要紧吗？
A: 大多数情况下不要紧，年轻人和孩子常见，跟呼吸有关；如果没有心慌、胸闷、头晕等症状，一般不用治疗，按时复查就行。
f: 我有时候会心慌
f: 我五十多了
f: 要去哪个科复查
f: 报告上还写了"T波改变"
d: 好的，放心了，谢谢。平时要注意什么吗？
n: 好的
n: 体检前一天能喝酒吗
n: 公司体检能查出乙肝吗

# telecom | zh
Q: 携号转网怎么办理？
A: 先发短信"CXXZ#姓名#证件号码"到原运营商查询是否符合条件，符合的话拿身份证去新运营商营业厅办理，一般两天内完成。
f: 短信回复说我有合约未到期
f: 合约还有三个月
f: 转网后号码还是原来的吗
f: 能在网上办吗，不想跑营业厅
f: 宽带是绑定在这个号上的
d: 可以转了，谢谢。那原来的话费余额怎么退？
n: 谢谢
n: 哪家运营商的信号最好
n: 怎么设置来电转接
n: OK 了解了

# telecom | zh
Q: 这个月流量超了，扣了我八十多块钱
A: 超出套餐的流量按每GB 5元计费，您本月超出了16GB；可以订一个流量加油包，之后超出会按加油包计算，便宜很多。
f: 我根本没用那么多
f: 是不是后台自动更新了
f: 能不能把这八十块退给我
f: 我以为是不限量的套餐
d: 行吧，那就订个加油包。有没有每月自动续订的？
n: 好的
n: 家里宽带能升级到千兆吗
n: 怎么查话费余额
n: 算了，就这样吧
f: 我这个月都在家用wifi啊

# telecom | zh
Q: 宽带一到晚上就特别慢
A: 晚上是使用高峰，先重启一下光猫和路由器，再用网线直连电脑测速；如果直连也慢，我们安排师傅上门检查线路。
f: 直连也慢
f: 每天晚上八点以后
f: 测速只有十几兆，我办的是三百兆
f: 重启过好几次了
d: 直连是正常的，看来是路由器的问题，谢谢。推荐换什么样的路由器？
n: 好的
n: 搬家了宽带能跟着迁吗
n: 怎么限制孩子晚上上网

# hr | zh
Q: 年假没休完能折现吗？
A: 按规定，单位安排休假而员工因个人原因不休的，可以不补；单位没安排的，未休的年假要按日工资的300%支付（含正常工资）。
f: 是领导一直不批
f: 我马上要离职了
f: 公司规定年假年底清零
f: 300%是怎么算的
f: 我只剩三天
d: 清楚了，谢谢。那离职的时候年假怎么算？
n: 谢谢
n: 病假工资怎么算
n: 公司不给交社保怎么办
n: 懂了，我去找HR聊聊

# hr | zh
Q: 试用期辞职要提前多久说？
A: 试用期内提前三天通知用人单位就可以解除劳动合同，不需要公司批准；转正以后要提前三十天书面通知。
f: 我还有两天就转正了
f: 口头说行吗
f: 公司说要找到接替的人才能走
f: 那这个月工资还会发吗
f: 合同里写的是提前一个月
d: 好的，明白。那离职证明公司必须开吗？
n: 好的谢谢
n: 面试的时候怎么谈薪资
n: 公积金怎么提取
n: 好的，那我明天就提
f: HR 说要走流程，要一个月

# hr | zh
Q: 换工作中间断了一个月社保，有影响吗？
A: 影响不大：医保断缴期间不能报销，但补缴后一般能恢复；养老是累计缴费年限的，断一个月只是少一个月。要注意的是买房、落户这类看连续缴纳的地方。
f: 我在上海，准备明年买房
f: 能自己补缴吗
f: 新公司说下个月才能交
f: 断缴期间生病了怎么办
d: 明白了，谢谢。那以后要是自己交灵活就业社保，怎么办理？
n: 谢谢
n: 个人所得税怎么退
n: 劳动合同到期不续签有补偿吗

# insurance | zh
Q: 车被剐了，对方全责，需要走我的保险吗？
A: 对方全责的话由对方保险公司赔付，不用走你的保险，也不影响你明年的保费；现场拍照、报交警或者走快处快赔，拿到责任认定书就行。
f: 对方跑了
f: 当时没报警，只拍了照
f: 对方说私了，给我五百
f: 修车要三千多
d: 好的，已经报了交警。那修车的时候要去4S店吗？
n: 谢谢
n: 车险到期了怎么续
n: 新手上路要注意什么
n: 好的，那我走对方的保险，谢谢

# insurance | zh
Q: 重疾险和医疗险有什么区别？
A: 重疾险是确诊合同约定的重疾就一次性赔一笔钱，怎么花自己定；医疗险是报销看病的实际花费。两者是互补的，最好都配。
f: 我已经有公司的医疗险了
f: 预算只有一年三千
f: 我有甲状腺结节，还能买吗
f: 那百万医疗险算哪种
f: 给父母买的话选哪个
d: 懂了，谢谢。重疾险买消费型还是返还型好？
n: 好的谢谢
n: 车险有什么区别
n: 养老金怎么计算
n: 大概明白了，我再考虑考虑

# insurance | zh
Q: 家里水管爆了，楼下被泡了，保险能赔吗？
A: 如果你买了家财险并且含"第三者责任"，楼下的损失可以赔；自己家的损失看是否保了"管道破裂"责任，通常有免赔额。
f: 我没有买家财险
f: 是物业的总管道爆的
f: 楼下要我赔两万
f: 房子是租的
d: 好的，我联系一下保险公司。报案需要准备什么材料？
n: 谢谢
n: 冬天水管冻住了怎么办
n: 房子漏水找物业还是找开发商

# housing | zh
Q: 房东不肯退押金，说我把墙弄脏了
A: 正常使用造成的磨损不能扣押金；先拿入住和退房时的照片跟房东协商，协商不成可以找12345或者向法院起诉，金额小的可以走小额诉讼。
f: 入住的时候没拍照
f: 墙是本来就有点黄
f: 押金是三千
f: 房东把我拉黑了
f: 中介说不关他们的事
d: 好，我先打12345。起诉的话要准备什么？
n: 谢谢
n: 租房合同到期房东要涨房租怎么办
n: 墙面发黄怎么清理
n: 行，我先去跟他好好谈谈
f: 他说要扣一千五的刷墙费

# housing | zh
Q: 公积金可以用来付房租吗？
A: 可以，没有自有住房的职工能提取公积金支付房租，在公积金App或者网站上申请，每月或每季度提取一次，额度各地不一样。
f: 我在杭州
f: 我名下有一套老家的房子
f: 房东不给开租房发票
f: 合租也行吗
d: 好的，提取成功了。那以后买房的话还能用公积金贷款吗？
n: 谢谢
n: 公积金贷款利率多少
n: 租房被中介骗了怎么办

# housing | zh
Q: 买二手房要交哪些税？
A: 主要是契税（首套90平以下1%、以上1.5%），卖方可能要交增值税和个税；满五唯一的房子个税免征，满两年的增值税免征。
f: 房子是满两年不满五年的
f: 这些税一般谁出
f: 我是第二套
f: 120平的
f: 合同里写的是"税费各付"，什么意思
d: 懂了，谢谢。那过户流程大概要多久？
n: 谢谢
n: 装修贷款好办吗
n: 二手车交易要交税吗
n: 清楚了，感谢

# education | zh
Q: 孩子上小学需要什么条件？
A: 一般要满6周岁，户口或者居住证在学区内，有的城市还看房产和社保年限；具体以当地教育局当年的招生政策为准。
f: 孩子九月才满6岁，差一个月
f: 我们是租房，没有房产
f: 社保只交了一年
f: 户口在老家
d: 好的，明白了，谢谢。那什么时候开始报名？
n: 好的
n: 幼儿园有没有年龄限制
n: 孩子不爱写作业怎么办
n: 好的，那我等教育局的通知

# education | zh
Q: 考研调剂是怎么回事？
A: 第一志愿没录上但过了国家线，可以在调剂系统里申请其他学校同专业或相近专业的名额，一般三月底四月初开放，要盯紧各校的调剂通知。
f: 我只过了国家线两分
f: 可以跨专业调剂吗
f: 调剂系统在哪里
f: 能同时填几个
d: 清楚了，谢谢。调剂的复试一般考什么？
n: 谢谢
n: 考研英语怎么复习
n: 公务员考试报名什么时候

# education | zh
Q: 大学挂科了会影响毕业吗？
A: 一般可以补考或者重修，补考通过就不影响毕业；但如果挂科学分太多或者必修课没过，可能拿不到学位证，各校规定不一样。
f: 我挂的是高数，必修课
f: 补考也没过
f: 会影响保研吗
f: 这学期挂了两门
d: 好的谢谢。那重修要交钱吗？
n: 嗯嗯
n: 四级没过能毕业吗
n: 怎么申请转专业

# government | zh
Q: 身份证丢了怎么补办？
A: 带户口本到户籍所在地或者任意一个可以异地办理的派出所补办，现场拍照采集指纹，二十天左右能拿到，着急可以办临时身份证。
f: 我在外地上班，户口在老家
f: 临时身份证多久能拿
f: 能不能网上办
f: 我下周要坐飞机
f: 要交多少钱
d: 好的，办好了。那补办以后旧的身份证还能用吗？
n: 谢谢
n: 护照过期了怎么换
n: 驾照丢了怎么办
n: 好的，我周末去派出所

# government | zh
Q: 个税年度汇算要怎么弄？
A: 每年3月1日到6月30日在"个人所得税"App上办理，核对收入和专项附加扣除，多交的可以申请退税，少交的要补税。
f: 我去年换过工作，有两份收入
f: 专项附加扣除在哪填
f: 系统显示我要补税两千多
f: 我已经过了6月30号
f: 房租能扣吗
d: 弄好了，退了八百多，谢谢。退税一般几天到账？
n: 谢谢
n: 社保基数怎么查
n: 开个体户要交什么税
n: 弄完了，没问题了
f: 专项附加扣除那里 children education 怎么填

# government | zh
Q: 驾照到期了怎么换证？
A: 到期前90天内可以在"交管12123"App上申请换证，需要先做体检（可以在线上传体检结果），新驾照会邮寄到家。
f: 已经过期一个月了
f: 体检在哪里做
f: 我人在国外
f: 有违章没处理能换吗
d: 申请了，谢谢。新驾照大概几天能收到？
n: 好的
n: 违章怎么处理
n: 买车上牌要什么材料

# coding | zh
Q: python 报错 IndentationError: unexpected indent 是什么意思？
A: 缩进不对：某一行前面多了空格或者制表符，Python 对缩进很严格；检查报错那一行，跟上一行对齐，最好统一用4个空格。
f: 我看着是对齐的啊
f: 是从网上复制过来的代码
f: 怎么显示制表符
f: 用的是记事本写的
d: 改好了，谢谢。那vscode里怎么设置自动把tab换成空格？
n: 好的
n: python 怎么读取 excel 文件
n: java 的缩进有要求吗
n: 可以了，谢啦
f: 现在又报 TabError 了

# coding | zh
Q: git push 的时候提示 rejected，怎么办？
A: 说明远程有你本地没有的提交，先 git pull --rebase 把远程的改动拉下来，解决冲突后再 push。
f: pull 以后有冲突
f: 不想要远程的改动，直接覆盖行吗
f: 提示 fatal: refusing to merge unrelated histories
f: 我是一个人在用这个仓库
d: 搞定了，感谢。以后怎么避免这种情况？
n: 好的
n: github 怎么建私有仓库
n: 怎么删除一个分支

# contracts | zh
Q: 合同里写"本合同自双方签字盖章之日起生效"，只签字没盖章算生效吗？
A: 要看条款怎么写：写的是"签字盖章"，通常理解为两者都要有才生效；但如果对方已经开始履行、你也接受了，法院一般会认定合同成立。
f: 对方只盖了章没签字
f: 我们已经付了一半的款
f: 是电子合同，有电子签名
f: 盖的是合同专用章不是公章
d: 懂了，谢谢。那以后签合同怎么写生效条款比较稳？
n: 谢谢
n: 公章丢了怎么办
n: 劳动合同一定要签吗
n: 好，我让对方补签一下

# contracts | zh
Q: 这个条款什么意思："如乙方逾期交付超过十五日，甲方有权解除合同并要求乙方返还已付款项。"
A: [解除] 这是逾期交付的解除条款：乙方晚交超过15天，甲方可以解除合同，并要回已经付的钱。
f: 晚了十四天呢
f: 要回钱的时候能要利息吗
f: 乙方说是疫情原因
f: 那甲方不解除的话能要违约金吗
f: 超过十五日是按自然日还是工作日
d: 清楚了，谢谢。那甲方解除合同要怎么通知乙方？
n: 好的
n: 快递丢件了能要赔偿吗
n: 下一个条款："本合同一式两份，双方各执一份。"

# contracts | zh
Q: 租房合同里写"提前退租押金不退"，合法吗？
A: 这类约定一般是有效的违约金条款，但如果押金明显高于房东的实际损失，你可以要求调低；房东很快租出去的话，损失就很小。
f: 押金是两个月房租
f: 房东一周就租出去了
f: 是因为公司调我去外地
f: 我自己找了人接着租
d: 好的，我去跟房东谈谈。谈不拢的话去哪里投诉？
n: 谢谢
n: 租房合同要不要去备案
n: 中介费一般收多少

# legal | zh
Q: 公司拖欠工资两个月了，怎么办？
A: 先保留劳动合同、工资条、考勤记录等证据，向当地劳动监察大队投诉，或者直接申请劳动仲裁，仲裁不收费，时效是一年。
f: 没签劳动合同
f: 公司说资金周转困难，下个月一定发
f: 我已经离职了
f: 一年从什么时候开始算
f: 只有微信聊天记录
d: 好的，我去准备材料。劳动仲裁需要请律师吗？
n: 谢谢
n: 被公司辞退有赔偿吗
n: 加班费怎么算
n: 谢谢，我先去劳动监察那边问问
f: 老板说再闹就不发了

# legal | zh
Q: 朋友借了我两万，只有微信转账记录，没写借条，能要回来吗？
A: 能，微信转账记录加上聊天里提到借钱、还钱的内容，就是有效证据；先发消息催讨并保存记录，不还的话可以去法院起诉。
f: 聊天记录里没说是借钱
f: 他把我拉黑了
f: 已经过去四年了
f: 转账备注写的是"生活费"
f: 他说那是我送他的
d: 明白了，谢谢。起诉的话去哪个法院？
n: 谢谢
n: 微信聊天记录怎么恢复
n: 被网贷催收骚扰怎么办
n: 好的，我先把聊天记录都截图保存

# contracts | zh
Q: 这个条款是什么意思："乙方应保证所交付产品不侵犯任何第三方的知识产权。"
A: [知识产权保证] 这是知识产权保证条款：乙方保证交的货没有侵犯别人的专利、商标、著作权等，出了问题由乙方负责。
f: 那如果是我们给的设计图呢
f: 出了问题乙方要赔多少
f: 只保证国内还是全世界
f: 乙方是小厂，赔不起怎么办
f: 这个保证有期限吗
d: 明白了，谢谢。那要不要再加一个赔偿条款？
n: 谢谢
n: 注册商标要多久
n: 再帮我看一条："本合同未尽事宜，双方另行协商。"

# contracts | zh
Q: "甲方有权在提前三十日书面通知乙方的情况下单方解除本合同"，这对乙方公平吗？
A: [解除] 这是甲方的任意解除权，对乙方不太有利：甲方可以随时退出，乙方却没有对等的权利，签之前可以要求对等或者约定解除补偿。
f: 那乙方能不能也加一条一样的
f: 补偿一般怎么约定
f: 我们就是乙方，已经签了
f: 三十日是从通知发出还是收到算
d: 好的，懂了。那解除以后已经做完的活怎么结算？
n: 好的
n: 什么是霸王条款
n: 劳动合同里公司能随便解除吗

# contracts | zh
Q: 合同写了"逾期付款按每日千分之五支付违约金"，这个标准高不高？
A: 偏高：千分之五一天相当于年化180%左右，远超过实际损失；如果对方起诉，法院一般会按实际损失的130%左右调低。
f: 对方已经拖了三个月了
f: 实际损失怎么证明
f: 那我们当初约定的不就白写了
f: 调低以后大概是多少
f: 是我们自己定的条款
d: 明白了，谢谢。下次签合同约定多少比较合适？
n: 好的谢谢
n: 信用卡逾期利息怎么算
n: 民间借贷利率上限是多少

# customer service | zh
Q: 会员自动续费了，我不想续，能退吗？
A: 续费后7天内没有使用会员权益的，可以在"我的-会员-自动续费管理"里申请退款；同时关掉自动续费，下个月就不会再扣了。
f: 已经过了十天了
f: 我没用过啊，就是忘了关
f: 找不到自动续费管理
f: 是通过苹果扣的
f: 那退的是全额吗
d: 关掉了，谢谢。那以后还能单独买一个月的吗？
n: 好的，没事了
n: 怎么注销账号
n: 你们的客服电话是多少

# customer service | zh
Q: 外卖送错了，送成别人的了
A: 抱歉给您带来不便！请在订单页点击"申请售后"，选择"送错餐"并上传照片，我们会为您全额退款，或者联系骑手重新配送。
f: 骑手电话打不通
f: 我已经吃了一点了才发现
f: 照片没拍，已经扔了
f: 重新配送要多久
d: 已经退款了，谢谢。那这个骑手能投诉吗？
n: 好的，知道了
n: 附近有什么好吃的推荐吗
n: 怎么开发票

# customer service | zh
Q: 我的账号被盗了，怎么办？
A: 请立即通过"忘记密码"用绑定手机重置密码，然后在"安全中心"退出所有设备的登录；如果手机也被改了，请提交身份证照片申诉找回。
f: 绑定的手机号被改了
f: 申诉要多久
f: 里面还有余额五百多
f: 对方用我的号在发广告
d: 找回来了，谢谢。那怎么防止以后再被盗？
n: 谢谢
n: 怎么修改昵称
n: 你们有没有电脑版

# legal | zh
Q: 被公司辞退了，能拿到赔偿吗？
A: 看辞退的理由：公司没有合法理由辞退属于违法解除，可以要求2倍经济补偿，也就是每工作一年赔两个月工资；如果是你严重违纪，就没有补偿。
f: 公司说我业绩不达标
f: 我才工作八个月
f: 他们让我自己写辞职信
f: 工资按税前还是税后算
f: 没有任何书面通知，就是口头说的
d: 明白了。那我去仲裁需要准备哪些证据？
n: 谢谢
n: 失业金怎么领
n: 找新工作的时候要怎么说离职原因

# legal | zh
Q: 邻居装修吵得不行，晚上十点还在砸墙，能管吗？
A: 能。一般规定晚上和中午不能施工，可以先找物业，物业不管可以打110报警，噪音扰民可以按《治安管理处罚法》处理。
f: 物业说他们管不了
f: 报警以后警察来了说了几句就走了
f: 是周末早上七点就开始
f: 能不能让他赔我点钱
d: 好的，我再找一次物业。那可以去哪里投诉物业不作为？
n: 谢谢
n: 楼上漏水到我家怎么办
n: 装修一般要多久

# general | zh
Q: 红烧肉怎么做才不腻？
A: 先把五花肉焯水去浮沫，再小火煸出油，炒糖色的时候少放点糖，加一点山楂或者陈皮一起炖，出锅前大火收汁。
f: 家里没有山楂
f: 用高压锅可以吗
f: 煸出来的油要倒掉吗
f: 我用的是冰糖
d: 做出来很好吃，谢谢！那红烧排骨也是这样做吗？
n: 太好了
n: 糖醋排骨怎么做
n: 五花肉怎么挑

# general | zh
Q: 失眠怎么办？每天凌晨两三点才睡着
A: 固定起床时间，白天别补觉，睡前一小时不看手机，下午以后少喝咖啡和茶；如果持续一个月以上影响白天，建议去医院睡眠科看看。
f: 我是上夜班的
f: 不看手机根本睡不着
f: 已经两个多月了
f: 吃褪黑素有用吗
d: 好的，我试试。那睡眠科要挂哪个医院的？
n: 谢谢
n: 早上起不来怎么办
n: 午睡多久合适

# general | zh
Q: 新买的绿萝叶子发黄是怎么回事？
A: 最常见是浇水太多、根部积水，其次是晒太阳太多；盆土干了再浇，放在散射光的地方，把黄叶剪掉就行。
f: 我一周浇一次
f: 放在卫生间里
f: 盆底没有孔
f: 新叶子也黄了
d: 好的，明白了。那需要施肥吗？
n: 谢谢啦
n: 多肉怎么养
n: 家里养什么花好养

# it support | zh
Q: 手机存储空间不足，但我也没装多少东西
A: 多半是微信等聊天软件的缓存和聊天记录占的：在微信"设置-通用-存储空间"里清理缓存，再看看相册里有没有大视频可以删。
f: 微信占了40个G
f: 清理缓存会把聊天记录删掉吗
f: 我是安卓手机
f: 其他占了20多个G是什么
f: 照片都备份过了
d: 清出来了，谢谢。那聊天记录能备份到电脑上吗？
n: 好的
n: 哪款手机内存大又便宜
n: 手机发烫怎么办
"""


def _parse(block: str) -> list[Dialogue]:
    dialogues = []
    for chunk in block.strip().split("\n\n"):
        lines = [line.strip() for line in chunk.strip().splitlines()]
        header, question, answer, *turns = lines
        domain, language = (part.strip() for part in header.removeprefix("#").split("|"))
        if not (question.startswith("Q: ") and answer.startswith("A: ")):
            raise ValueError(f"{header}: a dialogue opens with Q: and A:")
        parsed = []
        for turn in turns:
            code, _, text = turn.partition(": ")
            if code not in LABELS or not text.strip():
                raise ValueError(f"{header}: {turn!r} must start with f:, d: or n:")
            parsed.append((LABELS[code], text.strip()))
        dialogues.append(
            Dialogue(
                language=language,
                domain=domain,
                question=question.removeprefix("Q: "),
                answer=answer.removeprefix("A: "),
                turns=tuple(parsed),
            )
        )
    return dialogues


DIALOGUES: tuple[Dialogue, ...] = (*_parse(_EN), *_parse(_ZH))

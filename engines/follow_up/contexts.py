# ruff: noqa: E501 -- the contexts are data, one per line
"""Hand-written contexts of the trained detector's labelled set (`engines.follow_up.pair_set`).

One context is a previous question and answer with what a next turn may be about: `topic` (the
matter, for templates), two `scenarios` (conditions a follow-up may ask about), two `related`
questions on the same case that an accepted answer leads to (deepening), a `situation` (a follow-up
about the user's own case, often without a marker or a word of the answer) and a `switch` (a new
matter that reuses the answer's words). Four domains, two languages, written for this set only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Context:
    language: str
    domain: str
    question: str
    answer: str
    topic: str
    scenarios: tuple[str, str]
    related: tuple[str, str]
    situation: str
    switch: str


# domain | question | answer | topic | scenario ; scenario | related ; related | situation | switch
_EN = """
contracts | What type of clause is this: "The Buyer shall pay each invoice within 30 days of receipt."? | [payment] A payment clause: each invoice is due 30 days after the buyer receives it. | the 30-day payment term | the buyer pays late ; the invoice is disputed | does the contract say who pays the bank fees ; is there a discount for early payment | I'm the supplier and they paid 45 days late, can I charge interest | Different thing: does receipt of goods also start the warranty on a laptop I bought?
contracts | Is this a termination clause: "Either party may end this agreement on 90 days' written notice."? | [termination] Yes, it allows termination for convenience with 90 days' written notice. | the 90-day notice | we send the notice by email only ; the other side ignores the notice | what happens to unpaid invoices after termination ; can we terminate earlier for breach | we signed 2 months ago and want out next week | How many days' notice do I have to give my landlord in Berlin?
contracts | What does "Liability of either party is capped at the fees paid in the prior 12 months" mean? | [liability] It limits each party's total damages to the fees paid in the twelve months before the claim. | the liability cap | the claim is for data loss ; we paid nothing in the last year because of a free trial | are indirect damages excluded too ; does the cap cover indemnities | our fees were 8k and the damage is 200k | Is there a cap on the fees a bank can charge for a late card payment?
contracts | Explain this clause: "Each party shall keep the other's Confidential Information secret for 5 years." | [confidentiality] A confidentiality clause: each side must keep the other's confidential information secret for five years. | the confidentiality duty | an employee leaks it after leaving ; the information becomes public | what counts as Confidential Information here ; can we share it with our lawyers | we already showed their price list to a partner firm | What's the best way to keep my passwords secret at home?
contracts | Is a pandemic covered by "Neither party is liable for delays caused by events beyond its reasonable control"? | [force majeure] It is a force majeure clause; a pandemic can qualify if it truly prevented performance and was beyond control. | force majeure | only our supplier is affected ; the delay lasts a year | do we need to notify the other party ; can the contract be ended after a long force majeure event | our factory closed for three weeks because of a lockdown | Which events are beyond control in a football match, like rain delays?
contracts | Which law applies under "This agreement is governed by the laws of England and Wales"? | [governing law] English law governs the agreement, whatever the parties' own countries. | the governing law | we are a French company ; the dispute is about a delivery in Germany | which courts hear disputes under this agreement ; can we change the governing law later | we're in Spain and the buyer is in Ohio | What are the laws on cycling at night in Wales?
contracts | What is this: "If the Supplier delivers late, it shall pay 0.5% of the order value per week of delay."? | [liquidated damages] A liquidated damages clause: a fixed sum of 0.5% of the order value per week late. | the late-delivery penalty | the delay is partly our fault ; the order is cancelled anyway | is there a maximum on these damages ; can we claim more if our loss is bigger | they are 6 weeks late on a 100k order | How much per week does it cost to deliver a parcel late with DHL?
contracts | Is this a deposit clause: "The Buyer shall pay a deposit (定金) of 20% of the price within 3 days of signing."? | [deposit] Yes, a deposit clause: the buyer pays 20% of the price as a deposit within three days. | the deposit | the seller breaches the contract ; the buyer pays the deposit a week late | is the deposit refunded when the deal completes ; does the deposit count towards the price | I paid 20% and now the seller wants to cancel | What deposit does a rental car company usually ask for?
contracts | Can the supplier assign this contract: "Neither party may assign this agreement without the other's prior written consent"? | [assignment] No, not without the other party's prior written consent. | the consent requirement | the supplier is bought by another company ; consent is given by phone | can consent be unreasonably refused ; does this cover subcontracting | our supplier just sold its business to a competitor | Can I assign my parking space at work to a colleague?
contracts | What does "This agreement renews automatically for one-year terms unless cancelled 60 days before expiry" mean? | [renewal] It renews itself for another year each time unless someone cancels at least 60 days before the end. | the automatic renewal | we miss the 60-day deadline ; the price goes up at renewal | can the price change on renewal ; how do we cancel in writing | it expires on March 1 and today is February 10 | How do I stop my streaming subscription renewing automatically?
contracts | Is this a non-compete: "For 2 years after termination the Consultant shall not work for a competitor in the EU"? | [non-compete] Yes, a non-compete: the consultant may not work for an EU competitor for two years after the end. | the non-compete | the consultant moves to the UK ; the competitor is only a small part of the market | is two years enforceable ; does the consultant get paid during the restriction | I got an offer from a rival in Austria, starting next month | What are the rules for a competitor at the Berlin marathon?
contracts | What is an indemnity like "The Supplier shall indemnify the Customer against third-party IP claims"? | [indemnity] The supplier must cover the customer's losses if a third party claims the product infringes its IP. | the IP indemnity | the customer modified the product ; the claim is only threatened, not filed | who controls the defence of the claim ; is the indemnity capped | we got a letter from a patent troll last week | Does my home insurance indemnify me against a stolen bicycle?
legal | How long do I have to sue for a breach of contract in California? | In California, written contracts have a four-year limitation period, oral contracts two years. | the limitation period | the breach was only discovered later ; the contract was partly written | does sending a demand letter pause the clock ; can the parties shorten the period by contract | I'm in Texas, so what are the deadlines there | How long do I have to return a jacket I bought online in California?
legal | Can my employer fire me for posting about work on social media? | It depends: at-will employers can, but posts about pay or working conditions shared with coworkers are often protected. | protected posts | the post was on a private account ; I criticised my manager by name | do I get severance if I'm fired for it ; can they ask for my social media passwords | I only complained that our overtime isn't paid | What's the best time of day for posting on social media for a small shop?
legal | What is the difference between a will and a living trust? | A will takes effect at death and goes through probate; a living trust works during your life and usually avoids probate. | living trusts | I move to another state ; I forget to put the house into the trust | who should be the trustee ; how much does setting up a trust cost | I own a house and two bank accounts, nothing else | What's the difference between a living room and a family room?
legal | Do I need a lawyer to file for divorce? | No, you can file yourself, though a lawyer helps when there are children, property or disagreement. | filing without a lawyer | my spouse hires a lawyer ; we have a house together | what forms do I need to file ; how long does an uncontested divorce take | we've been married 12 years and agree on everything | Do I need a licence to file my own taxes in another state?
legal | My landlord kept my whole deposit. What can I do? | Ask in writing for an itemised list of deductions; if none comes within the legal deadline, you can sue in small claims court. | getting the deposit back | the landlord claims damage I didn't cause ; I left without giving notice | how much can I claim in small claims ; do I need photos of the flat | they kept 2,400 and sent nothing | What deposit can I get back for recycling glass bottles?
legal | Is a verbal agreement legally binding? | Often yes, but some contracts, like land sales or deals longer than a year, must be in writing. | oral contracts | there was no witness ; we only agreed by text message | how do I prove a verbal agreement ; is a handshake deal for a car binding | my cousin promised to pay back 5,000 when we met | Is a verbal warning from a referee binding in football?
legal | What is a power of attorney? | A document letting someone act for you in legal or financial matters, either generally or for specific acts. | the power of attorney | I lose mental capacity ; the agent misuses my money | can I revoke a power of attorney ; does it need a notary | my mother is 84 and wants me to handle her bank | What is the power of a car engine measured in?
legal | Can I record a phone call without telling the other person? | In one-party consent states you can if you take part in the call; in all-party states like California everyone must agree. | recording calls | the other person is in another state ; I only record my boss | can a recording be used in court ; do voicemails count | I live in Florida and want to record my ex | Can I record a podcast on my phone without a microphone?
legal | What happens if I die without a will? | Your estate passes under the state's intestacy rules, usually to a spouse and children, then other relatives. | intestacy | I'm not married to my partner ; I have a child from a previous marriage | who becomes the executor ; does my partner inherit the house | we've lived together 15 years but never married | What happens to my phone plan if I move abroad?
legal | Is a non-disclosure agreement enforceable if I didn't get paid for signing it? | Usually yes: a job offer or access to information is enough consideration for an NDA. | NDA consideration | I signed it after starting the job ; the NDA has no end date | can an NDA stop me reporting a crime ; what can they do if I break it | they made me sign it three months in, with no raise | Do I get paid for signing up to a supermarket loyalty card?
legal | Can I break my lease early because of a job transfer? | Only if the lease or state law allows it; otherwise you may owe rent until the landlord re-lets the flat. | breaking the lease | I find a new tenant myself ; my employer pays the penalty | does the landlord have to try to re-let ; can I sublet instead | the lease runs to December and I move in July | Can I transfer my gym membership to another branch when I move?
legal | What is small claims court? | A simple court for disputes up to a limit (for example 10,000 dollars in many states) where you usually represent yourself. | small claims court | the amount is above the limit ; the other party lives in another state | how do I serve the papers ; can I appeal a small claims decision | a contractor owes me 3,200 for a job he never finished | What is the smallest claim an insurer will pay out on a phone?
customer service | My order #4821 hasn't arrived after 10 days. | Sorry about that! Order #4821 shipped on the 3rd and tracking shows it is held at the local depot. | the held parcel | the depot is closed on weekends ; I'm not home when they deliver | can I change the delivery address ; will I get a refund for the shipping | I'm leaving for two weeks tomorrow morning | Can I order 10 more of the same item for my office?
customer service | How do I return a pair of shoes that don't fit? | Start a return in your account within 30 days; we email a prepaid label and refund once the shoes arrive. | the shoe return | I threw away the box ; I bought them 35 days ago | can I exchange for another size instead ; how long does the refund take | I wore them once outside | Do you sell shoes for running on ice?
customer service | I was charged twice for my subscription. | I can see two charges; the second is a pending authorisation and should drop off within 5 business days. | the double charge | it doesn't drop off after 5 days ; my bank shows both as completed | can I get a receipt for the charge ; can I switch to yearly billing | it's been a week and it's still there | What is your subscription price for students?
customer service | How do I reset my password? | Click "Forgot password" on the login page and follow the link we email you; it expires after one hour. | the password reset | the email never arrives ; the link has expired | can I turn on two-factor login ; how do I change my email address | I don't have access to that email anymore | How do I reset the router in my hotel room?
customer service | Can I cancel my flight booking? | Yes, in "My trips": fully flexible fares are refunded, basic fares get a voucher minus a 50 euro fee. | the cancellation | the airline changes the schedule first ; I booked through a travel agent | can I change the date instead of cancelling ; how long is the voucher valid | I have a basic fare for Friday | Can I bring my cat on a train to Paris?
customer service | The app keeps crashing when I open the camera. | Please update to version 5.2 and allow camera access in Settings; that fixes most crashes. | the camera crash | it still crashes after updating ; I'm on an old Android phone | how do I send you a crash report ; can I upload photos from the web instead | I'm on iPhone 8 with iOS 16 | Which camera do you recommend for birdwatching?
customer service | My package arrived damaged. | Sorry! Please send photos of the box and item within 48 hours and we will send a replacement or refund. | the damage claim | I already threw away the box ; only part of the order is damaged | do I need to send the damaged item back ; can I get a refund instead of a replacement | the glass vase is in pieces and I noticed 3 days later | How do I package a fragile vase to send to my sister?
customer service | Why was my card declined? | The bank refused the payment; common reasons are a wrong billing address, a limit or a fraud check. | the declined card | the address is correct ; it works in other shops | can I pay by PayPal instead ; will my order be held | I just moved and changed the address yesterday | Why was my visa application declined by the embassy?
customer service | How do I upgrade my plan? | Go to Billing, pick the new plan and confirm; you pay the difference for the rest of the month. | the upgrade | I upgrade in the middle of the month ; I want to downgrade later | does the upgrade include more users ; can I get an invoice for the company | we're on Basic with 4 users and need 10 | How do I upgrade the RAM in my laptop?
customer service | Where can I find my invoice? | Invoices are under Account, then Billing history; each one can be downloaded as a PDF. | downloading invoices | I need an invoice from last year ; the company name on it is wrong | can invoices be emailed automatically ; can I add a VAT number | my accountant needs all of 2024 by Monday | Where can I find a cheap accountant in Leeds?
customer service | Can I pause my meal kit deliveries? | Yes, you can skip up to four weeks in a row from the Deliveries page, before Wednesday midnight. | pausing deliveries | I miss the Wednesday cutoff ; I need to pause for six weeks | can I change the meals in next week's box ; is there a fee for skipping | I'm on holiday for the whole of August | Can I pause a YouTube video and resume it on my TV?
general | What's a good way to learn Python as a beginner? | Start with a free course like the official tutorial, write small programs every day and build one project you care about. | learning Python | I only have 20 minutes a day ; I have no maths background | which editor should I use ; should I learn Python 2 or 3 | I'm 45 and have never coded | What's a good way to learn to swim as an adult?
general | How long should I boil an egg for a soft yolk? | About six minutes from boiling water for a large egg, then cool it in cold water. | the soft-boiled egg | the eggs come straight from the fridge ; I'm at high altitude | how long for a hard yolk ; should I add salt to the water | my eggs are small ones from a farm | How long should I boil water for tea in the mountains?
general | What's the capital of Australia? | Canberra, not Sydney; it was chosen as a compromise between Sydney and Melbourne. | Canberra | Sydney is bigger ; Melbourne was the capital earlier | how many people live in Canberra ; when was Canberra founded | I'm flying into Sydney, is it far | What's the capital gains tax in Australia?
general | How do I make my phone battery last longer? | Lower screen brightness, turn off background refresh for apps you rarely use and avoid keeping it at 100 % all night. | saving battery | I use GPS all day ; my phone is 4 years old | should I replace the battery ; does dark mode help | I'm on a Pixel 6 and it dies by 3 pm | How do I make my car battery last longer in winter?
general | Can you summarise the causes of World War I? | Militarism, alliances, imperialism and nationalism, set off by the assassination of Archduke Franz Ferdinand in 1914. | the causes | the assassination had failed ; Britain had stayed neutral | how did the US get involved ; how long did the war last | I need it for a 10-year-old's homework | Can you summarise the causes of high inflation right now?
general | What is a good daily step count? | Around 7,000 to 10,000 steps a day is linked with lower health risks for most adults. | the step count | I mostly swim instead of walking ; I'm over 70 | does walking speed matter ; how many calories do 10,000 steps burn | I sit at a desk and do about 3,000 | What is a good daily budget for a trip to Japan?
general | How do I convert Celsius to Fahrenheit? | Multiply by 9/5 and add 32: 20 °C is 68 °F. | the conversion | the temperature is negative ; I need Kelvin instead | is there a quick mental trick ; what is body temperature in Fahrenheit | my oven only shows Fahrenheit and the recipe says 180 | How do I convert a PDF to a Word file?
general | What should I pack for a week of hiking in Scotland? | Waterproof jacket and trousers, layers, broken-in boots, midge repellent, a map and a head torch. | the packing list | it's in winter ; I'm staying in huts, not a tent | do I need a permit to wild camp ; which months have the fewest midges | I'll be on the West Highland Way in May | What should I pack for a week at a beach hotel in Spain?
general | Why is the sky blue? | Sunlight scatters off air molecules, and blue light scatters much more than red (Rayleigh scattering). | the scattering | the sun is low at sunset ; there is a lot of dust in the air | why are clouds white ; is the sky blue on Mars | my kid asked and I need a one-line version | Why is my pool water green?
general | How much water should I drink a day? | Roughly 2 litres for women and 2.5 for men from all drinks and food, more in heat or exercise. | daily water intake | I drink a lot of coffee ; I run every morning | can you drink too much water ; does tea count | I weigh 95 kg and work outdoors | How much water does a dishwasher use per cycle?
general | What's a simple recipe for pancakes? | Mix 1 cup flour, 1 cup milk, 1 egg, a spoon of sugar and a pinch of salt, then fry in a hot buttered pan. | the pancake recipe | I have no eggs ; I want them fluffy | can I make the batter the night before ; how do I make them gluten-free | I'm cooking for six kids | What's a simple recipe for a birthday speech?
"""

_ZH = """
contracts | 这是什么类型的条款："买方应在收到发票后三十日内付清货款。" | [付款] 付款条款：买方须在收到发票后三十日内付清货款。 | 三十天付款期 | 买方逾期付款 ; 发票有争议 | 合同有没有约定银行手续费谁出 ; 提前付款有没有折扣 | 我是卖方，对方已经拖了四十五天才付 | 另外问下，收到货以后保修期是从哪天开始算的，我买的手机
contracts | "任何一方可提前九十日书面通知解除本合同"是什么条款？ | [解除] 解除条款：任何一方提前九十日书面通知即可解除合同。 | 九十日通知期 | 只发了微信通知 ; 对方不理会通知 | 解除后没付的货款怎么办 ; 对方违约的话能不能马上解除 | 我们两个月前才签的，下周就想解约 | 租房的话提前多少天通知房东退租
contracts | "双方赔偿责任以前十二个月已付费用为限"是什么意思？ | [责任限制] 责任限制条款：每方的赔偿总额不超过索赔前十二个月已支付的费用。 | 赔偿上限 | 损失是数据丢失 ; 去年是免费试用没付钱 | 间接损失是不是也排除了 ; 赔偿上限包不包括第三方索赔 | 我们一年才付了八千，损失有二十万 | 信用卡逾期的罚息有没有上限
contracts | 解释一下："双方应对对方的保密信息保密五年。" | [保密] 保密条款：双方须对对方的保密信息保密五年。 | 保密义务 | 员工离职后泄露 ; 信息已经公开了 | 哪些信息算保密信息 ; 能不能给我们的律师看 | 我们已经把对方的报价单给合作方看过了 | 家里的wifi密码怎么设置才安全
contracts | 疫情属于"因不可抗力导致的延误，双方均不承担责任"吗？ | [不可抗力] 这是不可抗力条款；疫情确实导致无法履行且无法控制时可以构成不可抗力。 | 不可抗力 | 只是我们的供应商受影响 ; 延误了一整年 | 需要通知对方吗 ; 不可抗力持续很久能解除合同吗 | 我们工厂因为封控停了三个星期 | 下雨推迟的足球比赛门票能退吗
contracts | "本合同适用中华人民共和国法律"是什么条款？ | [法律适用] 法律适用条款：合同受中国法律管辖，不论双方是哪国公司。 | 适用法律 | 我们是香港公司 ; 争议是在德国交货引起的 | 发生争议去哪个法院 ; 以后能改适用法律吗 | 我们在深圳，买方在美国俄亥俄州 | 在北京骑电动车有什么法律规定
contracts | "卖方逾期交货的，每逾期一周按订单金额的0.5%支付违约金"是什么条款？ | [违约金] 违约金条款：卖方每晚交一周支付订单金额0.5%的违约金。 | 逾期违约金 | 延误有一部分是我们的原因 ; 订单最后取消了 | 违约金有没有上限 ; 实际损失更大能多要吗 | 十万的订单他们已经晚了六周 | 快递晚到一周能要求赔多少钱
contracts | 这是定金条款吗："买方应于签约后三日内支付合同总价20%的定金。" | [定金] 是定金条款：买方须在签约后三日内支付总价20%的定金。 | 定金 | 卖方违约 ; 买方晚了一周才付定金 | 合同履行完定金退不退 ; 定金能不能抵作价款 | 我付了20%，现在卖方想毁约 | 租车公司一般收多少押金
contracts | "未经对方事先书面同意，任何一方不得转让本合同"是什么意思？ | [转让] 转让限制条款：没有对方事先书面同意，不能把合同转给别人。 | 书面同意 | 供应商被别的公司收购了 ; 对方只是口头同意 | 对方能不能无理拒绝 ; 分包算不算转让 | 我们的供应商刚把业务卖给了竞争对手 | 公司的车位能转让给同事吗
contracts | "本合同期满自动续期一年，除非一方在期满前六十日提出终止"是什么意思？ | [续期] 自动续期条款：除非有人在到期前六十天提出终止，合同每次自动延长一年。 | 自动续期 | 错过了六十天的期限 ; 续期时涨价 | 续期的时候能涨价吗 ; 怎么书面通知终止 | 三月一号到期，今天是二月十号 | 视频会员自动续费怎么关
contracts | "合同终止后两年内，顾问不得为竞争对手工作"是竞业限制吗？ | [竞业限制] 是竞业限制条款：合同结束后两年内顾问不得为竞争对手工作。 | 竞业限制 | 顾问去了香港 ; 竞争对手业务很小 | 两年有效吗 ; 限制期间有没有补偿金 | 我拿到了一家同行的offer，下个月入职 | 马拉松比赛的竞争对手怎么超越
contracts | "供应商应赔偿客户因第三方知识产权索赔遭受的损失"是什么条款？ | [赔偿] 知识产权赔偿条款：第三方告产品侵权时由供应商承担客户的损失。 | 知识产权赔偿 | 客户改动过产品 ; 对方只是发函还没起诉 | 诉讼由谁主导 ; 赔偿有没有上限 | 我们上周收到了一封专利律师函 | 家财险能赔自行车被偷吗
legal | 借钱不还，多久之内可以起诉？ | 一般诉讼时效是三年，从知道或应当知道权利受损之日起算。 | 诉讼时效 | 对方一直承诺会还 ; 借条上没写还款日期 | 发催款短信能不能中断时效 ; 时效过了还能要吗 | 我2020年借给同学两万，他一直拖着 | 借书逾期多久图书馆会罚款
legal | 公司不签劳动合同怎么办？ | 入职满一个月不签书面合同的，可以要求公司从第二个月起支付双倍工资，最长十一个月。 | 双倍工资 | 我自己拒绝签的 ; 已经干了两年 | 怎么申请劳动仲裁 ; 需要准备什么证据 | 我入职五个月了，公司一直说下个月签 | 签证需要公司开在职证明吗
legal | 遗嘱和遗赠有什么区别？ | 遗嘱是处分遗产的文件；遗赠是通过遗嘱把财产给法定继承人以外的人。 | 遗赠 | 受遗赠人没有表示接受 ; 遗嘱没有公证 | 自书遗嘱要满足什么条件 ; 遗嘱可以改吗 | 我想把房子留给照顾我的侄女 | 游戏里的装备可以送给别人吗
legal | 离婚一定要请律师吗？ | 不一定，协议离婚去民政局办理即可；有争议的诉讼离婚请律师更稳妥。 | 自己办离婚 | 对方请了律师 ; 我们有一套共同房产 | 协议离婚要准备什么材料 ; 离婚冷静期是多久 | 我们结婚十二年，财产都说好了 | 开公司一定要请会计吗
legal | 房东不退押金怎么办？ | 先书面要求房东说明扣款理由；协商不成可以向法院起诉或找消协调解。 | 退押金 | 房东说我弄坏了东西 ; 我提前搬走没通知 | 起诉要多少诉讼费 ; 需要拍房子的照片吗 | 他扣了我两千四，什么都没说 | 共享单车押金怎么退
legal | 口头约定有法律效力吗？ | 一般有效，但房屋买卖等法律要求书面形式的合同除外，口头约定举证较难。 | 口头合同 | 没有证人 ; 只是在微信上说好的 | 怎么证明有口头约定 ; 口头答应的借款算数吗 | 我表哥见面时答应还我五千 | 裁判口头警告会记入比赛吗
legal | 什么是委托书？ | 委托书是授权他人代你办理法律或财务事务的文件，可以是全权委托或特定事项。 | 委托书 | 委托人失去了行为能力 ; 受托人乱用钱 | 委托可以撤销吗 ; 委托书需要公证吗 | 我妈妈84岁了，想让我去银行帮她办事 | 汽车发动机的功率怎么算
legal | 偷偷录音能当证据吗？ | 只要不是以侵害他人隐私或违法的方式取得，自己参与的谈话录音一般可以作为证据。 | 录音证据 | 对方在外地 ; 我只录了老板说的话 | 录音需要原始载体吗 ; 微信语音算不算 | 我想录下前夫承认欠钱的话 | 手机录歌怎么去掉杂音
legal | 没有遗嘱，遗产怎么分？ | 按法定继承：第一顺序是配偶、子女、父母，他们平均分配。 | 法定继承 | 我和伴侣没有领证 ; 我有前一段婚姻的孩子 | 遗产管理人是谁 ; 伴侣能继承房子吗 | 我们同居十五年但一直没结婚 | 手机套餐没用完的流量能留给家人吗
legal | 签了保密协议但公司没给钱，有效吗？ | 一般有效；但竞业限制需要给补偿，单纯保密义务不以补偿为前提。 | 保密协议效力 | 我是入职后才签的 ; 协议没写期限 | 保密协议能不能阻止我举报违法 ; 违反了会怎样 | 他们入职三个月后才让我签，也没加薪 | 超市会员卡注册送钱吗
legal | 因为工作调动能提前退租吗？ | 要看租赁合同怎么约定；没有约定的，提前退租一般要承担违约责任。 | 提前退租 | 我自己找到下一个租客 ; 公司愿意付违约金 | 房东有没有义务再出租 ; 能不能转租 | 合同到十二月，我七月就要搬走 | 健身卡搬家了能转到别的门店吗
legal | 什么是小额诉讼？ | 小额诉讼是金额较小、事实清楚的案件适用的简易程序，一审终审。 | 小额诉讼 | 金额超过了上限 ; 对方在外省 | 怎么送达起诉状 ; 对判决不服能上诉吗 | 装修师傅欠我三千二没干完活 | 手机碎屏保险最少赔多少
customer service | 我的订单4821十天了还没到。 | 抱歉！订单4821已于3号发出，物流显示包裹在本地网点滞留。 | 滞留的包裹 | 网点周末不上班 ; 送货时我不在家 | 能改收货地址吗 ; 运费能退吗 | 我明天一早要出差两周 | 同样的东西我想再给办公室订十个
customer service | 鞋子不合脚怎么退货？ | 30天内在账户里申请退货，我们会发预付运单，收到鞋后退款。 | 退鞋 | 鞋盒扔了 ; 已经买了35天 | 能换个尺码吗 ; 退款多久到账 | 我穿出去过一次 | 你们有冰面跑步用的鞋吗
customer service | 会员费被扣了两次。 | 我看到两笔扣款，第二笔是预授权，5个工作日内会自动撤销。 | 重复扣款 | 5天后还没撤销 ; 银行显示两笔都已完成 | 能开扣款凭证吗 ; 能改成按年付费吗 | 已经一个星期了还在 | 学生会员多少钱
customer service | 密码忘了怎么重置？ | 在登录页点"忘记密码"，按邮件里的链接操作，链接一小时内有效。 | 重置密码 | 邮件一直没收到 ; 链接过期了 | 能开两步验证吗 ; 怎么修改绑定邮箱 | 那个邮箱我已经登不上了 | 酒店房间的路由器怎么重启
customer service | 机票能退吗？ | 可以在"我的行程"里退：灵活票全额退款，经济舱基础票扣50元后退代金券。 | 退票 | 航空公司先改了航班时间 ; 我是通过旅行社订的 | 能改签吗 ; 代金券有效期多久 | 我周五的是基础票 | 坐高铁能带猫吗
customer service | 一打开相机app就闪退。 | 请升级到5.2版本并在设置里允许相机权限，大多数闪退就能解决。 | 相机闪退 | 升级后还是闪退 ; 我的安卓手机很旧 | 怎么发崩溃报告给你们 ; 能用网页版上传照片吗 | 我是iPhone 8，iOS 16 | 拍鸟用什么相机好
customer service | 收到的包裹破损了。 | 抱歉！请在48小时内发送外箱和商品照片，我们会补发或退款。 | 破损理赔 | 外箱已经扔了 ; 只有一部分商品坏了 | 坏的要寄回去吗 ; 能退款不补发吗 | 玻璃花瓶碎了，我三天后才发现 | 易碎的花瓶怎么打包寄给我妹妹
customer service | 为什么我的银行卡付款失败？ | 银行拒绝了这笔付款，常见原因是账单地址不对、额度不够或风控拦截。 | 付款失败 | 地址是对的 ; 在别的店能用 | 能用支付宝付吗 ; 订单会保留吗 | 我刚搬家，昨天改了地址 | 为什么我的签证被拒了
customer service | 套餐怎么升级？ | 在"账单"里选择新套餐并确认，本月剩余天数补差价。 | 升级套餐 | 月中升级 ; 以后想降级 | 升级后用户数会增加吗 ; 能开公司发票吗 | 我们现在是基础版4个人，需要10个 | 笔记本内存怎么升级
customer service | 发票在哪里下载？ | 在"账户"-"账单记录"里，每张发票都可以下载PDF。 | 下载发票 | 需要去年的发票 ; 发票抬头写错了 | 发票能自动发邮件吗 ; 能加税号吗 | 会计周一前要2024年全年的 | 上海哪里有便宜的代账会计
customer service | 生鲜配送能暂停吗？ | 可以，在"配送"页面周三晚12点前最多连续跳过四周。 | 暂停配送 | 错过了周三截止 ; 要暂停六周 | 下周的菜能换吗 ; 跳过要收费吗 | 我整个八月都在外地 | 视频暂停后怎么在电视上继续看
general | 零基础怎么学Python？ | 先跟一门免费入门课，每天写点小程序，再做一个自己感兴趣的项目。 | 学Python | 我每天只有二十分钟 ; 我数学不好 | 用什么编辑器好 ; 学Python2还是3 | 我45岁了从来没写过代码 | 成年人零基础怎么学游泳
general | 溏心蛋要煮几分钟？ | 水开后放大个鸡蛋煮约六分钟，捞出过冷水。 | 溏心蛋 | 鸡蛋刚从冰箱拿出来 ; 在高原上煮 | 全熟要几分钟 ; 水里要加盐吗 | 我的是农家小土鸡蛋 | 在山上烧开水泡茶要多久
general | 澳大利亚的首都是哪里？ | 堪培拉，不是悉尼；它是悉尼和墨尔本之间的折中选择。 | 堪培拉 | 悉尼更大 ; 墨尔本以前当过首都 | 堪培拉有多少人口 ; 堪培拉哪年建的 | 我飞悉尼，过去远吗 | 澳大利亚的资本利得税是多少
general | 手机电池怎么更耐用？ | 调低屏幕亮度，关掉不常用app的后台刷新，不要整夜充到100%。 | 省电 | 我整天开导航 ; 手机已经用了四年 | 要不要换电池 ; 深色模式有用吗 | 我的小米手机下午三点就没电了 | 冬天汽车电瓶怎么保养
general | 简单说说第一次世界大战的起因。 | 军国主义、同盟体系、帝国主义和民族主义，导火索是1914年斐迪南大公遇刺。 | 一战起因 | 刺杀没有成功 ; 英国保持中立 | 美国是怎么参战的 ; 战争打了多久 | 要给十岁孩子写作业用 | 简单说说现在通货膨胀的原因
general | 每天走多少步合适？ | 大多数成年人每天七千到一万步与较低的健康风险相关。 | 每日步数 | 我主要是游泳不走路 ; 我七十多岁了 | 走路速度重要吗 ; 一万步消耗多少卡路里 | 我坐办公室一天才三千步 | 去日本旅游每天预算多少合适
general | 摄氏度怎么换算成华氏度？ | 乘以9/5再加32：20°C是68°F。 | 温度换算 | 温度是负数 ; 我要换成开尔文 | 有没有心算的小窍门 ; 人的体温是多少华氏度 | 我家烤箱只显示华氏度，菜谱写180度 | PDF怎么转成Word
general | 去西藏旅游要带什么？ | 防晒霜、保暖外套、墨镜、常用药和抗高反的药，身份证和边防证也要带好。 | 西藏行李 | 冬天去 ; 住青旅不住酒店 | 需要办什么证件 ; 几月去人最少 | 我五月走川藏线 | 去三亚海边住一周要带什么
general | 天空为什么是蓝色的？ | 阳光被空气分子散射，蓝光比红光散射得多得多（瑞利散射）。 | 散射 | 太阳快落山的时候 ; 空气里灰尘很多 | 云为什么是白的 ; 火星上的天空也是蓝的吗 | 孩子问我，要一句话的版本 | 为什么我家泳池的水变绿了
general | 每天喝多少水合适？ | 成年人每天从饮料和食物中摄入约两升水，天热或运动时更多。 | 每日饮水 | 我喝很多咖啡 ; 我每天早上跑步 | 喝水会喝多吗 ; 茶算不算 | 我95公斤，在户外工作 | 洗碗机洗一次用多少水
general | 煎饼怎么做最简单？ | 一杯面粉、一杯牛奶、一个鸡蛋、一勺糖和一撮盐拌匀，热锅刷油煎。 | 煎饼做法 | 家里没有鸡蛋 ; 想做得蓬松一点 | 面糊能提前一晚调好吗 ; 无麸质的怎么做 | 我要给六个孩子做 | 生日致辞怎么写最简单
"""


def _parse(block: str, language: str) -> list[Context]:
    contexts = []
    for line in block.strip().splitlines():
        domain, question, answer, topic, scenarios, related, situation, switch = (
            part.strip() for part in line.split(" | ")
        )
        first, second = (part.strip() for part in scenarios.split(" ; "))
        near, far = (part.strip() for part in related.split(" ; "))
        contexts.append(
            Context(
                language=language,
                domain=domain,
                question=question,
                answer=answer,
                topic=topic,
                scenarios=(first, second),
                related=(near, far),
                situation=situation,
                switch=switch,
            )
        )
    return contexts


CONTEXTS: tuple[Context, ...] = (*_parse(_EN, "en"), *_parse(_ZH, "zh"))
